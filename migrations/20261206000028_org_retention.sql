-- Retention per org (`PATCH /orgs/{id}/settings {"retention_days": N}`): the `org-retention`
-- job deletes the org's messages, drafts, notes, conversations and customers with nothing
-- left, inbox and event payloads, replies and dead letters and stored answers older than
-- this many days. NULL keeps them. The previous release neither reads nor writes it.
ALTER TABLE orgs ADD COLUMN retention_days integer;
-- Every row is NULL: nothing to check now, and the NOT VALID form takes no scan.
ALTER TABLE orgs ADD CONSTRAINT orgs_retention_days_range
    CHECK (retention_days BETWEEN 1 AND 3650) NOT VALID;
