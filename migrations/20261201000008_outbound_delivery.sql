-- Outbound delivery (the `channel-outbound` job and the dead-letter worker).

-- Each claim of an outbox row gets a fresh lease id; every write the holder makes afterwards
-- (a part accepted, the outcome) names it, so a worker whose lease lapsed and was taken over
-- cannot overwrite what the new holder records (AA5). `attempts` counts the failed provider
-- attempts of the current delivery round (3 end it); a dead-letter retry starts a new round.
ALTER TABLE outbox ADD COLUMN lease_id uuid;

-- The dead-letter table as the dead-letter worker uses it. `attempts` is every failed
-- provider attempt of the row so far; `retries` the dead-letter retries made (5 make it
-- `dead`); `provider_status` the provider's last HTTP status; `alerted_at` is set by the one
-- statement that raises the alert for a dead row (`… WHERE alerted_at IS NULL RETURNING`),
-- so exactly one pod alerts however many run.
ALTER TABLE channel_failures
    ADD COLUMN provider_status integer,
    ADD COLUMN retries integer NOT NULL DEFAULT 0,
    ADD COLUMN alerted_at timestamptz;
-- The dead-letter worker scans only rows waiting for a retry.
CREATE INDEX channel_failures_due ON channel_failures (next_attempt_at) WHERE status = 'queued';
-- `GET /dead-letters` pages newest first within an org.
CREATE INDEX channel_failures_org_recent ON channel_failures (org_id, created_at DESC, id DESC);
-- Dead rows not yet alerted (normally none: the pod that marks a row dead alerts at once;
-- this finds the rows of a pod that died in between).
CREATE INDEX channel_failures_unalerted ON channel_failures (id)
    WHERE status = 'dead' AND alerted_at IS NULL;
