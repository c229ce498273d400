-- What the expert saw is what is sent (SPEC §11): a draft answers one customer message and
-- is used at most once, and no customer message is left unanswered outside the pending list.
--
-- The customer message the item's draft answers, so that a draft never replaces one made
-- from a newer message and a release without a body sends only a draft that answers the
-- conversation's latest customer message. Nullable: rows from before keep finding it
-- through `drafts.message_id`.
ALTER TABLE expert_queue
    ADD COLUMN draft_message_id uuid REFERENCES messages (id) ON DELETE SET NULL;
UPDATE expert_queue q SET draft_message_id = d.message_id
FROM drafts d WHERE d.id = q.draft_id;

-- On an outbound reply: the latest customer message its release saw. A customer message
-- that no reply answers brings its item back to pending when its draft lands (a message
-- written while the expert was releasing the previous draft).
ALTER TABLE messages
    ADD COLUMN answers_message_id uuid REFERENCES messages (id) ON DELETE SET NULL;
