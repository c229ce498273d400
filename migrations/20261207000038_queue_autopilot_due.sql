-- no-transaction
-- The `autopilot-send` job's scan: the holds whose time has come, from an index that holds
-- only the items on hold. CONCURRENTLY, alone, so writes go on while it builds.
CREATE INDEX CONCURRENTLY expert_queue_autopilot_due
    ON expert_queue (send_at) WHERE status = 'auto_pending';
