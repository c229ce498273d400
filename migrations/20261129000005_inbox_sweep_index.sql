-- The sweeper's index of unprocessed events must not be usable by the statements that
-- claim, renew or finish one event by id. Its old predicate (processed_at IS NULL) is
-- implied by theirs, and while the statistics lag a burst the planner took it for a tiny
-- index and chose it over the primary key: every claim then scanned all unprocessed events
-- (68 ms each with 40 000 of them), and a backlog drained slower the larger it was. The
-- added condition on received_at is implied only by the sweeper's own query
-- (received_at < …), so those statements always use the primary key.
CREATE INDEX inbound_events_sweep ON inbound_events (received_at)
    WHERE processed_at IS NULL AND received_at IS NOT NULL;
DROP INDEX inbound_events_unprocessed;
