-- The expert half: release (F3) with its outbox, delivery status on messages, the realtime
-- event outbox, Idempotency-Key replays per org, and request ids in the audit log.

-- Claimed items are only ever held by one expert; the state and the holder go together.
ALTER TABLE expert_queue
    ADD CONSTRAINT expert_queue_claim_holder CHECK ((status = 'claimed') = (claimed_by IS NOT NULL));
-- Keyset pagination of the console queue: longest waiting first (created_at, id) and newest
-- activity first (updated_at, id), each within an org.
DROP INDEX expert_queue_org_status;
CREATE INDEX expert_queue_org_waiting ON expert_queue (org_id, created_at, id);
CREATE INDEX expert_queue_org_recent ON expert_queue (org_id, updated_at DESC, id DESC);

-- Outbound messages carry their delivery status; inbound ones leave these NULL.
ALTER TABLE messages
    ADD COLUMN delivery_status text
        CHECK (delivery_status IN ('queued', 'sent', 'retry', 'failed', 'dead')),
    ADD COLUMN provider_message_id text,
    ADD COLUMN delivered_at timestamptz,
    ADD COLUMN delivery_error text,
    ADD CONSTRAINT messages_delivery_outbound
        CHECK (direction = 'outbound' OR delivery_status IS NULL);
-- `GET /conversations/{id}?before=` pages back by (created_at, id).
DROP INDEX messages_conversation;
CREATE INDEX messages_conversation ON messages (conversation_id, created_at DESC, id DESC);

-- The outbox as the dispatch job uses it: a row is claimed with a lease (AA5: one
-- `UPDATE … WHERE status IN ('queued','retry') AND lease free RETURNING`), so two workers
-- never send it at once; `parts` records each accepted part's provider id, so a retry never
-- resends a part that went out.
ALTER TABLE outbox DROP CONSTRAINT outbox_status_check;
ALTER TABLE outbox ALTER COLUMN status SET DEFAULT 'queued';
UPDATE outbox SET status = 'queued' WHERE status = 'pending';
ALTER TABLE outbox
    ADD CONSTRAINT outbox_status_check
        CHECK (status IN ('queued', 'retry', 'sent', 'failed', 'dead')),
    ADD COLUMN locked_until timestamptz,
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN parts jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
DROP INDEX outbox_pending;
-- The outbox sweeper scans only rows still to send.
CREATE INDEX outbox_unsent ON outbox (next_attempt_at) WHERE status IN ('queued', 'retry');

-- The realtime event outbox. A flow inserts its events here in the transaction that causes
-- them, so an event exists exactly when its cause committed (a pod killed after the commit
-- loses nothing). No counter is touched on that path: one org's busy transactions never
-- queue on a shared row. The relay (one pod at a time, an advisory lock) moves rows to
-- `events`, giving them the org's next numbers, then publishes them.
CREATE TABLE event_outbox (
    id          bigserial PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    event       text NOT NULL,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- What the relay has published per org. A relay that died between numbering and publishing
-- leaves published_seq < seq; the next relay publishes the rest.
ALTER TABLE org_event_seq
    ADD COLUMN published_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN numbered_at timestamptz NOT NULL DEFAULT now();
UPDATE org_event_seq SET published_seq = seq;

-- Idempotency-Key replays (AA3), per org, user and key. `response_status` is NULL while the
-- first request runs; `locked_until` lets a retry take over a key whose pod died mid-request.
DROP TABLE idempotency_keys;
CREATE TABLE idempotency_keys (
    org_id           uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key              text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash     text NOT NULL,
    response_status  integer,
    response_body    jsonb,
    locked_until     timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- AA3: the first request with a key wins, on whichever pod it lands.
    PRIMARY KEY (org_id, user_id, key)
);
-- The expiry job deletes by age.
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- Which request did it (the `x-request-id` every response carries).
ALTER TABLE audit_log ADD COLUMN request_id text;
-- The relay's recovery looks only at orgs with numbered but unpublished events.
CREATE INDEX org_event_seq_unpublished ON org_event_seq (org_id) WHERE published_seq < seq;
