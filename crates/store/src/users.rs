//! Users, their argon2 password hashes, their org memberships and what revokes their
//! tokens: a per-user token version (every session at once) and a denylist of single
//! tokens (one logout), both in Postgres so a revocation holds whatever Redis is doing.

use crate::StoreError;
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use chrono::{DateTime, Utc};
use rand::rngs::OsRng;
use serde::Serialize;
use sqlx::{PgExecutor, PgPool};
use std::collections::HashMap;
use switchboard_domain::Role;
use uuid::Uuid;

/// A user as the application sees it (no hash).
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct User {
    /// Primary key.
    pub id: Uuid,
    /// Login address.
    pub email: String,
    /// Optional display name.
    pub display_name: Option<String>,
}

/// One org membership.
#[derive(Debug, Clone, Copy, Serialize, sqlx::FromRow, PartialEq, Eq, utoipa::ToSchema)]
pub struct Membership {
    /// The org.
    pub org_id: Uuid,
    /// The role held in it.
    pub role: Role,
}

/// The fewest characters a password may have (the CLI's `create-user` rule too).
pub const PASSWORD_MIN_CHARS: usize = 8;
/// The most bytes a password may have: hashing cost grows with it, and nobody types more.
pub const PASSWORD_MAX_BYTES: usize = 1024;

/// What is wrong with `password` as a new password, if anything.
pub fn password_problem(password: &str) -> Option<String> {
    if password.chars().count() < PASSWORD_MIN_CHARS {
        Some(format!(
            "the password must be at least {PASSWORD_MIN_CHARS} characters"
        ))
    } else if password.len() > PASSWORD_MAX_BYTES {
        Some(format!(
            "the password must be at most {PASSWORD_MAX_BYTES} bytes"
        ))
    } else {
        None
    }
}

/// Hashes a password with argon2id and a random salt. CPU-heavy: call it off the async
/// executor (`spawn_blocking`).
pub fn hash_password(password: &str) -> Result<String, StoreError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|_| StoreError::Crypto("password hashing failed"))
}

/// Checks a password against a stored PHC string. CPU-heavy, like [`hash_password`].
pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Creates a user with an already computed hash, or returns the existing user with that
/// address (`created` false). The unique index on `lower(email)` makes this race-free.
pub async fn create(
    pool: &PgPool,
    email: &str,
    password_hash: &str,
) -> Result<(User, bool), StoreError> {
    let inserted: Option<User> = sqlx::query_as(
        "INSERT INTO users (email, password_hash) VALUES ($1, $2)
         ON CONFLICT (lower(email)) DO NOTHING
         RETURNING id, email, display_name",
    )
    .bind(email)
    .bind(password_hash)
    .fetch_optional(pool)
    .await?;
    if let Some(user) = inserted {
        return Ok((user, true));
    }
    let existing: User =
        sqlx::query_as("SELECT id, email, display_name FROM users WHERE lower(email) = lower($1)")
            .bind(email)
            .fetch_one(pool)
            .await?;
    Ok((existing, false))
}

/// Inserts a new user in the caller's transaction; `None` when the address has an account
/// already (`users_email_key`).
pub async fn insert<'e>(
    db: impl PgExecutor<'e>,
    email: &str,
    password_hash: &str,
    display_name: Option<&str>,
) -> Result<Option<User>, StoreError> {
    Ok(sqlx::query_as(
        "INSERT INTO users (email, password_hash, display_name) VALUES ($1, $2, $3)
         ON CONFLICT (lower(email)) DO NOTHING
         RETURNING id, email, display_name",
    )
    .bind(email)
    .bind(password_hash)
    .bind(display_name)
    .fetch_optional(db)
    .await?)
}

/// What login needs to know about an address.
#[derive(Debug, Clone)]
pub struct LoginRecord {
    /// The user.
    pub user: User,
    /// The stored argon2 PHC string.
    pub password_hash: String,
    /// The version every token issued now carries (the `ver` claim).
    pub token_version: i64,
    /// Deactivated users cannot log in: by an operator (every org), or in every org they
    /// belong to by its admins.
    pub deactivated: bool,
    /// Deactivated by an operator (`admin deactivate-user`): every org at once, joining a
    /// new one included.
    pub locked: bool,
}

/// A user, their stored hash and their token standing, for login.
pub async fn find_for_login(pool: &PgPool, email: &str) -> Result<Option<LoginRecord>, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        user: User,
        password_hash: String,
        token_version: i64,
        locked: bool,
        deactivated: bool,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT u.id, u.email, u.display_name, u.password_hash, u.token_version,
                u.deactivated_at IS NOT NULL AS locked,
                u.deactivated_at IS NOT NULL
                OR (EXISTS (SELECT 1 FROM org_members m WHERE m.user_id = u.id)
                    AND NOT EXISTS (SELECT 1 FROM org_members m
                                    WHERE m.user_id = u.id AND m.deactivated_at IS NULL))
                AS deactivated
         FROM users u WHERE lower(u.email) = lower($1)",
    )
    .bind(email)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| LoginRecord {
        user: r.user,
        password_hash: r.password_hash,
        token_version: r.token_version,
        deactivated: r.deactivated,
        locked: r.locked,
    }))
}

/// Fetches a user by id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<User>, StoreError> {
    Ok(
        sqlx::query_as("SELECT id, email, display_name FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Adds (or changes) a membership; idempotent.
pub async fn add_member(
    pool: &PgPool,
    org_id: Uuid,
    user_id: Uuid,
    role: Role,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO org_members (org_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (org_id, user_id) DO UPDATE SET role = EXCLUDED.role",
    )
    .bind(org_id)
    .bind(user_id)
    .bind(role)
    .execute(pool)
    .await?;
    Ok(())
}

/// Removes `user_id` from `org_id` and bumps their token version in the same statement, so
/// every token they hold stops working with the membership; `false` when they were not a
/// member. Takes any executor so the removal's audit row can share its transaction.
pub async fn remove_member<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    let removed = sqlx::query(
        "WITH gone AS (DELETE FROM org_members WHERE org_id = $1 AND user_id = $2 RETURNING user_id)
         UPDATE users SET token_version = token_version + 1 WHERE id IN (SELECT user_id FROM gone)",
    )
    .bind(org_id)
    .bind(user_id)
    .execute(db)
    .await?
    .rows_affected();
    Ok(removed > 0)
}

/// Why a token no longer works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// This token was logged out (its `jti` is on the denylist).
    LoggedOut,
    /// The user's token version moved past the token's: a logout everywhere, a membership
    /// removal or a deactivation since the token was issued.
    Superseded,
    /// The user is deactivated.
    Deactivated,
    /// The user no longer exists.
    UserGone,
}

impl Revocation {
    /// A stable name, for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Revocation::LoggedOut => "logged_out",
            Revocation::Superseded => "superseded",
            Revocation::Deactivated => "deactivated",
            Revocation::UserGone => "user_gone",
        }
    }
}

/// What decides whether a user's tokens still work, and what they give access to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The current token version; older tokens are revoked.
    pub token_version: i64,
    /// Set by `admin deactivate-user`.
    pub deactivated: bool,
    /// Current memberships, oldest first.
    pub memberships: Vec<Membership>,
    /// The `jti`s of this user's logged-out tokens that have not expired yet.
    pub revoked: Vec<Uuid>,
}

impl Standing {
    /// The memberships a token with `version` and `jti` gives access to, or why it gives none.
    pub fn admit(&self, version: i64, jti: Uuid) -> Result<&[Membership], Revocation> {
        if self.deactivated {
            Err(Revocation::Deactivated)
        } else if version < self.token_version {
            Err(Revocation::Superseded)
        } else if self.revoked.contains(&jti) {
            Err(Revocation::LoggedOut)
        } else {
            Ok(&self.memberships)
        }
    }
}

/// The standing of each of `user_ids` that exists, in one statement: the REST extractor
/// and the socket handshake ask it for one user per request (it replaces the read of the
/// memberships they made anyway), each pod's socket check for all its sockets' users at once.
pub async fn standings(
    pool: &PgPool,
    user_ids: &[Uuid],
) -> Result<HashMap<Uuid, Standing>, StoreError> {
    #[derive(sqlx::FromRow)]
    struct Row {
        id: Uuid,
        token_version: i64,
        deactivated: bool,
        orgs: Vec<Uuid>,
        experts: Vec<bool>,
        revoked: Vec<Uuid>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT u.id, u.token_version, u.deactivated_at IS NOT NULL AS deactivated,
                COALESCE(m.orgs, '{}') AS orgs, COALESCE(m.experts, '{}') AS experts,
                ARRAY(SELECT r.jti FROM revoked_tokens r
                      WHERE r.user_id = u.id AND r.expires_at > now()) AS revoked
         FROM users u
         LEFT JOIN LATERAL (
             SELECT array_agg(org_id ORDER BY created_at, org_id) AS orgs,
                    array_agg(role = 'expert' ORDER BY created_at, org_id) AS experts
             FROM org_members WHERE user_id = u.id AND deactivated_at IS NULL) m ON true
         WHERE u.id = ANY($1)",
    )
    .bind(user_ids)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let memberships = row
                .orgs
                .into_iter()
                .zip(row.experts)
                .map(|(org_id, expert)| Membership {
                    org_id,
                    role: if expert { Role::Expert } else { Role::Admin },
                })
                .collect();
            let standing = Standing {
                token_version: row.token_version,
                deactivated: row.deactivated,
                memberships,
                revoked: row.revoked,
            };
            (row.id, standing)
        })
        .collect())
}

/// The standing of one user, `None` when they do not exist.
pub async fn standing(pool: &PgPool, user_id: Uuid) -> Result<Option<Standing>, StoreError> {
    Ok(standings(pool, &[user_id]).await?.remove(&user_id))
}

/// Puts one token on the denylist until `expires_at` (its own expiry), and deletes up to 100
/// rows whose token has expired since: every logout cleans up after earlier ones, so the
/// table holds about one day of logouts without a job of its own. Idempotent.
pub async fn revoke_token<'e>(
    db: impl PgExecutor<'e>,
    user_id: Uuid,
    jti: Uuid,
    expires_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "WITH swept AS (
             DELETE FROM revoked_tokens WHERE (user_id, jti) IN (
                 SELECT user_id, jti FROM revoked_tokens WHERE expires_at < now()
                 ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED))
         INSERT INTO revoked_tokens (user_id, jti, expires_at) VALUES ($1, $2, $3)
         ON CONFLICT (user_id, jti) DO NOTHING",
    )
    .bind(user_id)
    .bind(jti)
    .bind(expires_at)
    .execute(db)
    .await?;
    Ok(())
}

/// Ends every session of `user_id`: tokens issued before this carry an older version.
/// Returns the new version, `None` when the user does not exist.
pub async fn bump_token_version<'e>(
    db: impl PgExecutor<'e>,
    user_id: Uuid,
) -> Result<Option<i64>, StoreError> {
    Ok(sqlx::query_scalar(
        "UPDATE users SET token_version = token_version + 1 WHERE id = $1 RETURNING token_version",
    )
    .bind(user_id)
    .fetch_optional(db)
    .await?)
}

/// Sets `user_id`'s password hash and bumps their token version, ending every session they
/// hold; the new version (for a fresh token), `None` when the user does not exist or, with
/// `expected_version`, when the version moved since the caller read it.
pub async fn set_password<'e>(
    db: impl PgExecutor<'e>,
    user_id: Uuid,
    password_hash: &str,
    expected_version: Option<i64>,
) -> Result<Option<i64>, StoreError> {
    Ok(sqlx::query_scalar(
        "UPDATE users SET password_hash = $2, token_version = token_version + 1
         WHERE id = $1 AND ($3::bigint IS NULL OR token_version = $3)
         RETURNING token_version",
    )
    .bind(user_id)
    .bind(password_hash)
    .bind(expected_version)
    .fetch_optional(db)
    .await?)
}

/// A user's stored hash and token version, for a password check by id.
pub async fn password_of(
    pool: &PgPool,
    user_id: Uuid,
) -> Result<Option<(String, i64)>, StoreError> {
    Ok(
        sqlx::query_as("SELECT password_hash, token_version FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(pool)
            .await?,
    )
}

/// A user's account state after an activation change.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct AccountState {
    /// The user.
    pub id: Uuid,
    /// Login address.
    pub email: String,
    /// When they were deactivated; `None` when active.
    pub deactivated_at: Option<DateTime<Utc>>,
    /// The current token version.
    pub token_version: i64,
}

/// Deactivates `user_id` (login refused) and bumps their token version (every token they
/// hold stops working; a later reactivation does not bring them back). Deactivating again
/// keeps the first time and ends any session since. `None` when the user does not exist.
pub async fn deactivate<'e>(
    db: impl PgExecutor<'e>,
    user_id: Uuid,
) -> Result<Option<AccountState>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE users SET deactivated_at = COALESCE(deactivated_at, now()),
                          token_version = token_version + 1
         WHERE id = $1 RETURNING id, email, deactivated_at, token_version",
    )
    .bind(user_id)
    .fetch_optional(db)
    .await?)
}

/// Lets `user_id` log in again (tokens from before the deactivation stay revoked). `None`
/// when the user does not exist.
pub async fn reactivate<'e>(
    db: impl PgExecutor<'e>,
    user_id: Uuid,
) -> Result<Option<AccountState>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE users SET deactivated_at = NULL
         WHERE id = $1 RETURNING id, email, deactivated_at, token_version",
    )
    .bind(user_id)
    .fetch_optional(db)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() {
        let phc = hash_password("correct horse").expect("hash");
        assert!(phc.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &phc));
        assert!(!verify_password("wrong", &phc));
        assert!(!verify_password("correct horse", "not a phc string"));
    }
}
