-- Secrets that rotate (`PATCH /channel-connections/{id}`): when the secret that verifies a
-- connection's webhooks (Slack `signing_secret`, Twilio `auth_token`, Telegram
-- `secret_token`, email `webhook_secret`) is replaced, the old value keeps verifying until an
-- expiry the admin chose, so webhooks the provider signed before it switched are not refused.
--
-- The old value itself is encrypted with the others, in `secrets_ciphertext` (under
-- `_previous`), so nothing secret is ever stored in the clear and a re-encryption of that
-- column covers it. This column holds only the names and the expiries, e.g.
-- `{"signing_secret": "2026-12-02T10:00:00Z"}`: the API shows them without decrypting, and
-- the webhook path checks the expiry at verify time, so an expired value stops verifying
-- even if no write ever removes it (the next write does).
--
-- A constant default, so adding the column rewrites no row; the check scans the table once,
-- which holds one row per connection. Old pods never read the column.
ALTER TABLE channel_connections
    ADD COLUMN previous_secrets_expire_at jsonb NOT NULL DEFAULT '{}'::jsonb
        CONSTRAINT channel_connections_previous_secrets_object
        CHECK (jsonb_typeof(previous_secrets_expire_at) = 'object');
