-- no-transaction
-- Deleting a conversation (retention, erasure) cascades to `expert_queue` and first asks whether
-- any row of it still points at the conversation: through this index, not a scan of the
-- table per conversation (1.5 to 3 s per retention batch of 1 000 conversations without).
-- CONCURRENTLY, alone, so writes go on while it builds.
CREATE INDEX CONCURRENTLY expert_queue_conversation
    ON expert_queue (conversation_id);
