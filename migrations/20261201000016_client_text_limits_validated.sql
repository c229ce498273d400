-- Validates the length checks the previous migration added NOT VALID: a scan under SHARE
-- UPDATE EXCLUSIVE, which lets reads and writes go on.
ALTER TABLE audit_log VALIDATE CONSTRAINT audit_log_request_id_length;
ALTER TABLE users VALIDATE CONSTRAINT users_email_length;
ALTER TABLE users VALIDATE CONSTRAINT users_display_name_length;
ALTER TABLE orgs VALIDATE CONSTRAINT orgs_name_length;
ALTER TABLE channel_connections VALIDATE CONSTRAINT channel_connections_name_length;
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_key_length;
ALTER TABLE messages VALIDATE CONSTRAINT messages_body_length;
ALTER TABLE drafts VALIDATE CONSTRAINT drafts_body_length;
ALTER TABLE expert_queue VALIDATE CONSTRAINT expert_queue_draft_body_length;
