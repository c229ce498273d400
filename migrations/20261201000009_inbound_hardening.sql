-- Hardening the inbound path (issue 11): poison events are parked instead of retried for
-- ever, retries back off, admins list and replay events, and processed events are pruned.

-- `retry_at`: a failed event is not re-enqueued by the sweeper before this time (backoff
-- that doubles with each failed attempt). `parked_at`: set when an event has failed
-- `INBOX_MAX_ATTEMPTS` times; a parked event is never claimed nor swept until an admin
-- replays it (`POST /inbound-events/{id}/replay`), which clears it.
ALTER TABLE inbound_events
    ADD COLUMN retry_at  timestamptz,
    ADD COLUMN parked_at timestamptz;

-- The sweeper's index now leaves parked events out, so a pile of them can never stand
-- between the sweeper and newer lost events. As before, its predicate is implied only by
-- the sweeper's query (`received_at IS NOT NULL`), so the claim, renewal and completion of
-- one event keep using the primary key.
CREATE INDEX inbound_events_sweep_live ON inbound_events (received_at)
    WHERE processed_at IS NULL AND parked_at IS NULL AND received_at IS NOT NULL;
DROP INDEX inbound_events_sweep;

-- The admin list (`GET /inbound-events`): one org's events, newest first, keyset-paged on
-- (received_at, id).
CREATE INDEX inbound_events_org_recent ON inbound_events (org_id, received_at DESC, id DESC);

-- Parked events are few; this keeps counting them for `/metrics` and listing them cheap.
CREATE INDEX inbound_events_parked ON inbound_events (org_id, received_at DESC, id DESC)
    WHERE parked_at IS NOT NULL;

-- The retention job deletes processed events older than `INBOX_RETENTION_DAYS`. Rows
-- arrive in `received_at` order, which is what a BRIN index summarises well: a few pages
-- for the whole table, next to nothing to maintain on the accept path.
CREATE INDEX inbound_events_received_brin ON inbound_events USING brin (received_at);
