-- Revocation that holds (SPEC §11): a login token stops working when its user logs out
-- (this token), logs out everywhere, is deactivated or loses a membership, on REST at the
-- next request and on sockets within seconds, whatever Redis is doing. Everything it needs
-- is here, in Postgres, because a revocation that lived in Redis would be forgotten by a
-- flush or missed while Redis is away.

-- Every token carries the version its user had when it was issued (the `ver` claim). Bumping
-- it ends every session of the user at once: `POST /auth/logout-all`, `admin
-- deactivate-user`, and a membership removal (in the removal's own statement). Only ever
-- incremented, so a token whose `ver` is older than this is revoked.
ALTER TABLE users ADD COLUMN token_version bigint NOT NULL DEFAULT 0;

-- Set by `admin deactivate-user`, cleared by `admin reactivate-user`: a deactivated user
-- cannot log in, and the version bump that comes with it ends the tokens already issued
-- (a reactivation does not bring them back).
ALTER TABLE users ADD COLUMN deactivated_at timestamptz;

-- The denylist of single tokens (`POST /auth/logout`), by the token's `jti`. A row is only
-- needed until the token would have expired anyway; expired rows are deleted by the logouts
-- that come after them (a bounded batch each, through `revoked_tokens_expiry`).
CREATE TABLE revoked_tokens (
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    jti         uuid NOT NULL,
    -- The token's own expiry (`exp`): past it the signature check refuses the token anyway.
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz NOT NULL DEFAULT now(),
    -- User first: the REST check asks for (user, jti) and each pod's socket check for all
    -- of a user's revoked tokens, both through this key. A logout repeated on any pod
    -- stores the token once (AA3).
    PRIMARY KEY (user_id, jti)
);
CREATE INDEX revoked_tokens_expiry ON revoked_tokens (expires_at);
