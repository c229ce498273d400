-- A processed event updates its conversation twice: the message statement (history, the
-- connection and `updated_at`, which two indexes hold) and the draft statement (only the
-- history, crates/flows/src/inbound/sql.rs STORE_DRAFTS). The second can be a HOT update,
-- written without a single index entry, when the row's page has room for its new version:
-- leave that room on every page. Takes SHARE UPDATE EXCLUSIVE (reads and writes go on) and
-- rewrites nothing: pages filled from now on keep the room, and existing pages get it as
-- their rows move.
ALTER TABLE conversations SET (fillfactor = 70);
