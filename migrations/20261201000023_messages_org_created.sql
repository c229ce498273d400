-- no-transaction
-- The reports page counts an org's messages per day and channel and finds the customer
-- messages of a date range: messages had no index by org and time. `direction` and
-- `channel` are included so the counts are read from the index alone. messages is big, so
-- the index is built CONCURRENTLY, alone in a migration without a transaction.
CREATE INDEX CONCURRENTLY messages_org_created
    ON messages (org_id, created_at) INCLUDE (direction, channel);
