-- Switchboard schema, part 1: tenancy, auth, channels, conversations and the durable
-- queues that make every pod interchangeable (see SPEC §1 AA1–AA10).
-- gen_random_uuid() is built into PostgreSQL 13+.

-- Tenants.
CREATE TABLE orgs (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- People who log in to the console. Passwords are argon2id PHC strings, never plain text.
CREATE TABLE users (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email          text NOT NULL CHECK (position('@' IN email) > 1),
    password_hash  text NOT NULL,
    display_name   text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
-- AA5: one account per address even when two pods create it at the same moment.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TYPE member_role AS ENUM ('admin', 'expert');

-- Which orgs a user belongs to and as what. The primary key makes "add member" idempotent (AA3).
CREATE TABLE org_members (
    org_id      uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role        member_role NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_members_user ON org_members (user_id);

CREATE TYPE channel_kind AS ENUM ('slack', 'whatsapp', 'telegram', 'email');

-- A provider account an org receives messages on. `secrets_ciphertext` is
-- nonce || AES-256-GCM(secrets JSON) under MASTER_ENCRYPTION_KEY; the API never returns it.
CREATE TABLE channel_connections (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    channel             channel_kind NOT NULL,
    name                text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    secrets_ciphertext  bytea NOT NULL,
    settings            jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    deleted_at          timestamptz
);
-- AA3/AA5: a retried "create connection" cannot make a second live connection of the same name.
CREATE UNIQUE INDEX channel_connections_name_key
    ON channel_connections (org_id, channel, name) WHERE deleted_at IS NULL;

-- The people an org talks to, one row per identity on a channel.
CREATE TABLE customers (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id        uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    channel       channel_kind NOT NULL,
    external_id   text NOT NULL,
    display_name  text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- AA3/AA5: the inbound job upserts customers with ON CONFLICT on this key.
CREATE UNIQUE INDEX customers_identity_key ON customers (org_id, channel, external_id);

CREATE TYPE conversation_status AS ENUM ('open', 'closed');

CREATE TABLE conversations (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id         uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    customer_id    uuid NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    channel        channel_kind NOT NULL,
    connection_id  uuid NOT NULL REFERENCES channel_connections (id),
    status         conversation_status NOT NULL DEFAULT 'open',
    -- {"history_summary": [...]}: updated by single atomic jsonb statements only.
    agent_context  jsonb NOT NULL DEFAULT '{"history_summary": []}'::jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    closed_at      timestamptz
);
-- AA5: at most one open conversation per org + customer + channel; find-or-create is one
-- INSERT … ON CONFLICT on this partial index.
CREATE UNIQUE INDEX conversations_one_open
    ON conversations (org_id, customer_id, channel) WHERE status = 'open';
CREATE INDEX conversations_org_updated ON conversations (org_id, updated_at DESC, id);

CREATE TYPE message_direction AS ENUM ('inbound', 'outbound');
CREATE TYPE message_author AS ENUM ('customer', 'agent', 'expert');

CREATE TABLE messages (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    conversation_id     uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    direction           message_direction NOT NULL,
    author              message_author NOT NULL,
    author_user_id      uuid REFERENCES users (id),
    body                text NOT NULL,
    channel             channel_kind NOT NULL,
    channel_message_id  text,
    created_at          timestamptz NOT NULL DEFAULT now()
);
-- AA3: a provider message is stored once however often the webhook or the job is retried.
CREATE UNIQUE INDEX messages_channel_message_key
    ON messages (org_id, channel, channel_message_id) WHERE channel_message_id IS NOT NULL;
CREATE INDEX messages_conversation ON messages (conversation_id, created_at, id);

-- The durable inbox: a 2xx to a webhook means a row here (SPEC §2).
CREATE TABLE inbound_events (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id         uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    connection_id  uuid NOT NULL REFERENCES channel_connections (id),
    channel        channel_kind NOT NULL,
    dedup_key      text NOT NULL,
    payload        jsonb NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    attempts       integer NOT NULL DEFAULT 0,
    last_error     text,
    processed_at   timestamptz
);
-- AA3: Postgres is the truth for webhook dedup (Redis SET NX is only the fast filter).
-- Keyed by connection, which implies the channel, because some providers' ids (Telegram's
-- update_id) are only unique per bot.
CREATE UNIQUE INDEX inbound_events_dedup_key ON inbound_events (connection_id, dedup_key);
-- The inbox sweeper scans only what is still unprocessed.
CREATE INDEX inbound_events_unprocessed ON inbound_events (received_at) WHERE processed_at IS NULL;

CREATE TYPE queue_status AS ENUM ('pending', 'awaiting_client', 'snoozed', 'resolved');

-- What experts work on: one live item per conversation.
CREATE TABLE expert_queue (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id              uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    conversation_id     uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    status              queue_status NOT NULL DEFAULT 'pending',
    -- Bumped by every transition; clients send it back for optimistic concurrency.
    version             integer NOT NULL DEFAULT 1,
    draft_body          text,
    draft_confidence    real,
    draft_cost_usd      numeric(12, 6),
    flagged_for_review  boolean NOT NULL DEFAULT false,
    claimed_by          uuid REFERENCES users (id),
    snoozed_until       timestamptz,
    sla_due_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    resolved_at         timestamptz,
    CHECK (status <> 'snoozed' OR snoozed_until IS NOT NULL)
);
-- AA5: "create or advance the queue item" is one INSERT … ON CONFLICT on this partial index.
CREATE UNIQUE INDEX expert_queue_one_live
    ON expert_queue (conversation_id) WHERE status <> 'resolved';
CREATE INDEX expert_queue_org_status ON expert_queue (org_id, status, created_at, id);
CREATE INDEX expert_queue_snoozed_due ON expert_queue (snoozed_until) WHERE status = 'snoozed';

-- Outbound replies waiting for dispatch, written in the release transaction (SPEC §2).
CREATE TABLE outbox (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id           uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    conversation_id  uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    message_id       uuid NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    connection_id    uuid NOT NULL REFERENCES channel_connections (id),
    channel          channel_kind NOT NULL,
    payload          jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    provider_id      text,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    sent_at          timestamptz
);
-- AA3: one outbound send per message, however often release is clicked or dispatch retried.
CREATE UNIQUE INDEX outbox_message_key ON outbox (message_id);
CREATE INDEX outbox_pending ON outbox (created_at) WHERE status = 'pending';

-- Dead-letter table for sends that failed after their retries.
CREATE TABLE channel_failures (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    outbox_id        uuid NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    org_id           uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    channel          channel_kind NOT NULL,
    error            text NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'retrying', 'dead', 'resolved')),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
-- AA3: one dead-letter entry per outbox row.
CREATE UNIQUE INDEX channel_failures_outbox_key ON channel_failures (outbox_id);

-- Client-supplied Idempotency-Key replays (AA3): the first response is stored and returned
-- to every retry of the same key by the same user.
CREATE TABLE idempotency_keys (
    user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key              text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash     text NOT NULL,
    response_status  integer,
    response_body    jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);

-- Scheduled runs: AA2, one run per (job, slot) across all pods — the primary key is the lock.
CREATE TABLE cron_runs (
    job          text NOT NULL,
    slot         timestamptz NOT NULL,
    pod_id       text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    status       text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'ok', 'failed')),
    detail       jsonb,
    PRIMARY KEY (job, slot)
);

-- Who did what, for admins and incident review.
CREATE TABLE audit_log (
    id             bigserial PRIMARY KEY,
    org_id         uuid REFERENCES orgs (id) ON DELETE CASCADE,
    actor_user_id  uuid REFERENCES users (id) ON DELETE SET NULL,
    action         text NOT NULL,
    target_type    text,
    target_id      uuid,
    details        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_org ON audit_log (org_id, created_at DESC);
