-- Length limits on text that clients supply, so no client string longer than its documented
-- limit is ever stored (docs/OPERATIONS.md, "Limits on stored text"). The API refuses longer
-- input first (400/422); these checks are the backstop for any path that forgets.
--
-- Each check is added NOT VALID here (a brief lock; new rows are checked at once) and
-- validated by the next migration, in a transaction of its own, which reads the table under
-- a lock that lets writes go on: a deploy does not block a large table. Rows written before
-- the limits existed are brought within them first: request ids longer than 64 characters
-- were client text and are dropped.

UPDATE audit_log SET request_id = NULL WHERE length(request_id) > 64;

ALTER TABLE audit_log ADD CONSTRAINT audit_log_request_id_length
    CHECK (length(request_id) <= 64) NOT VALID;
ALTER TABLE users ADD CONSTRAINT users_email_length
    CHECK (length(email) <= 254) NOT VALID;
ALTER TABLE users ADD CONSTRAINT users_display_name_length
    CHECK (length(display_name) <= 200) NOT VALID;
ALTER TABLE orgs ADD CONSTRAINT orgs_name_length
    CHECK (length(name) <= 200) NOT VALID;
ALTER TABLE channel_connections ADD CONSTRAINT channel_connections_name_length
    CHECK (length(name) <= 200) NOT VALID;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_key_length
    CHECK (length(key) <= 255) NOT VALID;
-- Message text: inbound text is cut to INBOUND_TEXT_MAX_BYTES (at most 1 MiB), a reply to
-- 32 000 characters, a draft to what the agent may answer (1 MiB).
ALTER TABLE messages ADD CONSTRAINT messages_body_length
    CHECK (octet_length(body) <= 1048576) NOT VALID;
ALTER TABLE drafts ADD CONSTRAINT drafts_body_length
    CHECK (octet_length(body) <= 1048576) NOT VALID;
ALTER TABLE expert_queue ADD CONSTRAINT expert_queue_draft_body_length
    CHECK (octet_length(draft_body) <= 1048576) NOT VALID;
