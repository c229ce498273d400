-- no-transaction
-- The draft statement (crates/flows/src/inbound/sql.rs, STORE_DRAFTS) asks whether a reply
-- already answers the message a draft is for: it reads the conversation's outbound messages.
-- Through `messages_conversation` that read walked every message of the conversation, so a
-- draft cost grew with the conversation's length (400 pages per event in a conversation of
-- 400 messages). This index holds the outbound ones only. Built CONCURRENTLY so that the
-- previous release keeps writing messages while it builds.
CREATE INDEX CONCURRENTLY messages_outbound
    ON messages (conversation_id) WHERE direction = 'outbound';
