-- Realtime events (SPEC §2, §3 F4): every event sent to Socket.IO clients is also kept
-- here with a per-org sequence number, so a client that missed some (a gap in `seq`, or a
-- reconnect) fetches them with `GET /events?after={seq}`.

-- One counter row per org. Allocating a number is
--   INSERT … ON CONFLICT (org_id) DO UPDATE SET seq = seq + 1 RETURNING seq
-- in the same transaction as the event insert: the row lock serialises the emits of one org
-- across all pods (AA5), a rolled-back insert gives its number back (no gaps, unlike a
-- Postgres SEQUENCE), and numbers become visible in order because the lock is held until
-- commit — a reader never sees seq N+1 before seq N.
CREATE TABLE org_event_seq (
    org_id  uuid PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    seq     bigint NOT NULL CHECK (seq > 0)
);

CREATE TABLE events (
    org_id      uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq > 0),
    -- The Socket.IO event name (SPEC §9: queue_item_created, queue_item_updated,
    -- message_created, agent_message_sent).
    event       text NOT NULL,
    -- event name + SHA-256 of the payload: the same event emitted twice (a retried job)
    -- keeps its first number instead of taking a second one.
    dedup_key   text NOT NULL,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- AA5: one event per number per org, whichever pod allocated it; also the index that
    -- serves `WHERE org_id = $1 AND seq > $2 ORDER BY seq`.
    PRIMARY KEY (org_id, seq)
);
-- AA3: a retried emit never creates a second event.
CREATE UNIQUE INDEX events_dedup_key ON events (org_id, dedup_key);
-- The retention cleanup deletes by age.
CREATE INDEX events_created_at ON events (created_at);
