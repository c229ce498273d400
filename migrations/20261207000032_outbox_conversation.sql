-- no-transaction
-- Deleting a conversation (retention, erasure) cascades to `outbox` and first asks whether
-- any row of it still points at the conversation: through this index, not a scan of the
-- table per conversation (1.5 to 3 s per retention batch of 1 000 conversations without).
-- CONCURRENTLY, alone, so writes go on while it builds.
CREATE INDEX CONCURRENTLY outbox_conversation
    ON outbox (conversation_id);
