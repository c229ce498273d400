-- no-transaction
-- The `org-retention` job takes an org's notes older than its window in batches by time;
-- built CONCURRENTLY so that the previous release keeps writing notes while it builds (and
-- therefore alone in a no-transaction migration).
CREATE INDEX CONCURRENTLY conversation_notes_org_created
    ON conversation_notes (org_id, created_at);
