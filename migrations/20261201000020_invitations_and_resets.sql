-- Team membership managed from the console: invitations by email, per-org deactivation, and
-- password resets. Tokens sent by mail are never stored: only their SHA-256, so a read of
-- this table (a backup, a replica) gives nobody a way in.

-- An invitation to join an org with a role, accepted once through the link mailed to
-- `email` (`POST /invitations/accept`). Pending while none of accepted/revoked is set and
-- `expires_at` is ahead.
CREATE TABLE invitations (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id        uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    email         text NOT NULL CHECK (position('@' IN email) > 1 AND length(email) <= 254),
    role          member_role NOT NULL,
    token_sha256  bytea NOT NULL CHECK (length(token_sha256) = 32),
    invited_by    uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    accepted_at   timestamptz,
    accepted_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    revoked_at    timestamptz
);
-- A token is looked up by its hash; two invitations never share one.
CREATE UNIQUE INDEX invitations_token ON invitations (token_sha256);
-- AA5: one open invitation per org and address, even when two admins on two pods invite the
-- same person at once (a new invitation revokes the open one first, in its transaction).
CREATE UNIQUE INDEX invitations_open ON invitations (org_id, lower(email))
    WHERE accepted_at IS NULL AND revoked_at IS NULL;

-- A member deactivated in one org by that org's admin: their membership gives no access
-- (the user's token version is bumped with it, ending their sessions), and a user whose
-- every membership is deactivated cannot log in. Unlike `users.deactivated_at` (an
-- operator's lock, every org at once), it leaves the user's other orgs alone.
ALTER TABLE org_members ADD COLUMN deactivated_at timestamptz;

-- A password reset link (`POST /auth/password-reset`), used once within its hour.
CREATE TABLE password_resets (
    token_sha256  bytea PRIMARY KEY CHECK (length(token_sha256) = 32),
    user_id       uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz
);
CREATE INDEX password_resets_user ON password_resets (user_id);
