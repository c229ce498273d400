-- Erasure of one customer (POST /customers/{id}/erase): a durable job row, and tombstones
-- that keep recognising the erased customer's old webhooks as duplicates. New tables only:
-- the previous release reads neither.

-- One erasure per customer: the row is the job (AA4: it survives the pod that started it;
-- the `customer-erasure` job takes up one whose lease lapsed) and, once done, the record of
-- what went. `customer_id` has no foreign key: the customer row is deleted by the erasure.
-- `counts` holds numbers per table only, never a name, number or text.
CREATE TABLE customer_erasures (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id        uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    customer_id   uuid NOT NULL,
    requested_by  uuid REFERENCES users (id) ON DELETE SET NULL,
    request_id    text,
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done')),
    attempts      integer NOT NULL DEFAULT 0,
    locked_until  timestamptz,
    counts        jsonb,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
-- AA3/AA5: two admins erasing the same customer on two pods make one job and one audit row.
CREATE UNIQUE INDEX customer_erasures_customer_key ON customer_erasures (customer_id);
-- The resume job scans only what is unfinished.
CREATE INDEX customer_erasures_pending ON customer_erasures (requested_at) WHERE status = 'pending';

-- The erased customer's inbox dedup keys, as SHA-256 of the key (never the key itself): the
-- intake insert skips an event whose key is here, so a provider's late retry of an old
-- webhook is answered as a duplicate and nothing is stored again.
CREATE TABLE inbound_tombstones (
    connection_id  uuid NOT NULL,
    dedup_sha256   bytea NOT NULL,
    erased_at      timestamptz NOT NULL DEFAULT now(),
    -- AA3: a retried erasure writes each tombstone once.
    PRIMARY KEY (connection_id, dedup_sha256)
);
