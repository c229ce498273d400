-- Team console: an org's saved replies, and experts' internal notes on a conversation.
--
-- Notes live in a table of their own, never in `messages`: every path that reaches a
-- customer (the outbox, the dispatch job) or the agent (the history the inbound job reads,
-- `agent_context.history_summary`) reads `messages` and the conversation row only, so no
-- query change anywhere can let a note leak out by accident. New tables only: the previous
-- release reads neither.

-- A snippet an org's admins keep for the reply box. `body` holds `{{customer.name}}`-style
-- placeholders, checked against the known names when it is saved (the API refuses others).
CREATE TABLE saved_replies (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id      uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    body        text NOT NULL CHECK (length(body) BETWEEN 1 AND 4000),
    created_by  uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- AA3/AA5: two admins (or one retried request) creating the same name on two pods make one
-- saved reply; the picker finds a reply by its name, so a name is one reply per org.
CREATE UNIQUE INDEX saved_replies_name_key ON saved_replies (org_id, lower(name));

-- An expert's note on a conversation, for the team only.
CREATE TABLE conversation_notes (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    conversation_id  uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    author_user_id   uuid REFERENCES users (id) ON DELETE SET NULL,
    body             text NOT NULL CHECK (length(body) BETWEEN 1 AND 4000),
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversation_notes_conversation ON conversation_notes (conversation_id, created_at, id);
