-- no-transaction
-- Deleting a message sets `expert_queue.draft_message_id` to NULL where it points at it: the
-- foreign key's check finds those items through this index instead of scanning the queue
-- per deleted row (retention and erasure delete messages in batches). CONCURRENTLY, alone.
CREATE INDEX CONCURRENTLY expert_queue_draft_message
    ON expert_queue (draft_message_id) WHERE draft_message_id IS NOT NULL;
