-- The realtime relay runs on one pod at a time, so that each org's events are numbered
-- gap-free and published in order (AA: one writer of the numbered log at a time). It used to
-- hold a session advisory lock; behind a transaction-mode pooler (RDS Proxy, PgBouncer) a
-- session lock is taken on whichever server connection the statement reached and cannot be
-- released reliably. This one-row lease holds nothing across transactions: a relay claims it
-- with `locked_until = now() + lease`, renews it while it works and lets it go at the end of
-- each cycle; a pod that died holding it is replaced within one lease.
CREATE TABLE relay_lease (
    -- One row: the whole database has one relay at a time.
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    -- The relay (one per pod process) that holds or last held it.
    holder uuid,
    locked_until timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO relay_lease DEFAULT VALUES;
