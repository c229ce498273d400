//! Users, their argon2 password hashes and their org memberships.

use crate::StoreError;
use crate::model::Role;
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use rand::rngs::OsRng;
use serde::Serialize;
use sqlx::PgPool;
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
    .await
    .map_err(StoreError::classify)?;
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

/// A user and their stored hash, for login.
pub async fn find_for_login(
    pool: &PgPool,
    email: &str,
) -> Result<Option<(User, String)>, StoreError> {
    let row: Option<(Uuid, String, Option<String>, String)> = sqlx::query_as(
        "SELECT id, email, display_name, password_hash FROM users WHERE lower(email) = lower($1)",
    )
    .bind(email)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(id, email, display_name, hash)| {
        (
            User {
                id,
                email,
                display_name,
            },
            hash,
        )
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
    .await
    .map_err(StoreError::classify)?;
    Ok(())
}

/// Removes `user_id` from `org_id`; `false` when they were not a member.
pub async fn remove_member(pool: &PgPool, org_id: Uuid, user_id: Uuid) -> Result<bool, StoreError> {
    Ok(
        sqlx::query("DELETE FROM org_members WHERE org_id = $1 AND user_id = $2")
            .bind(org_id)
            .bind(user_id)
            .execute(pool)
            .await?
            .rows_affected()
            > 0,
    )
}

/// The user's memberships, read fresh on every request so a removed member loses access at
/// once rather than when their token expires.
pub async fn memberships(pool: &PgPool, user_id: Uuid) -> Result<Vec<Membership>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT org_id, role FROM org_members WHERE user_id = $1 ORDER BY created_at, org_id",
    )
    .bind(user_id)
    .fetch_all(pool)
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
