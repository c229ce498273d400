-- no-transaction
-- Deleting a message sets `answers_message_id` of the messages that answered it to NULL: the
-- foreign key's check looks them up, a sequential scan of `messages` per deleted row without
-- this index (2 s per retention batch of 2 000 on a 200 000-message table). Partial: most
-- messages answer nothing. CONCURRENTLY, alone, so writes go on while it builds.
CREATE INDEX CONCURRENTLY messages_answers
    ON messages (answers_message_id) WHERE answers_message_id IS NOT NULL;
