-- Agent drafts: one per inbound message, however often the channel-inbound job runs.

CREATE TABLE drafts (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    conversation_id  uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    -- The inbound message this draft answers.
    message_id       uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    body             text NOT NULL,
    confidence       real,
    cost_usd         numeric(12, 6),
    -- True when the agent failed and this is the stored fallback text.
    fallback         boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now()
);
-- AA3: a retried or duplicated job cannot store a second draft for the same message.
CREATE UNIQUE INDEX drafts_message_key ON drafts (message_id);

-- The queue item points at the draft an expert is looking at.
ALTER TABLE expert_queue ADD COLUMN draft_id uuid REFERENCES drafts (id) ON DELETE SET NULL;

-- Which channel message (and the reply target) the inbound message came with, so a reply
-- can be addressed later without re-reading the raw event.
ALTER TABLE messages ADD COLUMN reply_to jsonb;
