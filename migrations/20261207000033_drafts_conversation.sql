-- no-transaction
-- Deleting a conversation (retention, erasure) cascades to `drafts` and first asks whether
-- any row of it still points at the conversation: through this index, not a scan of the
-- table per conversation (1.5 to 3 s per retention batch of 1 000 conversations without).
-- CONCURRENTLY, alone, so writes go on while it builds.
CREATE INDEX CONCURRENTLY drafts_conversation
    ON drafts (conversation_id);
