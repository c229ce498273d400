-- A job holds an inbox event for a bounded time while it works on it (an atomic claim,
-- AA5), so the sweeper does not hand the same event to a second worker mid-flight and the
-- agent is not asked twice. A killed pod's lease simply expires.
ALTER TABLE inbound_events ADD COLUMN locked_until timestamptz;
