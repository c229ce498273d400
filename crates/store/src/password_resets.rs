//! Password reset links: one per request, each used once within its hour. Tokens are made
//! and hashed as invitations' are ([`crate::invitations::new_token`]).

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

/// Stores a reset link for `user_id`, and deletes up to 100 that have expired or been used
/// (every request cleans up after earlier ones, so the table needs no job of its own).
pub async fn create<'e>(
    db: impl PgExecutor<'e>,
    user_id: Uuid,
    token_sha256: &[u8],
    expires_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "WITH swept AS (
             DELETE FROM password_resets WHERE token_sha256 IN (
                 SELECT token_sha256 FROM password_resets
                 WHERE expires_at < now() OR used_at IS NOT NULL
                 LIMIT 100 FOR UPDATE SKIP LOCKED))
         INSERT INTO password_resets (token_sha256, user_id, expires_at) VALUES ($1, $2, $3)",
    )
    .bind(token_sha256)
    .bind(user_id)
    .bind(expires_at)
    .execute(db)
    .await?;
    Ok(())
}

/// Why a reset token was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No such token.
    Unknown,
    /// Used already.
    Used,
    /// Past its hour.
    Expired,
}

/// Uses the token: marks it and every other open link of the same user used (a new
/// password ends them all), and returns the user. Run it in the transaction that sets the
/// password.
pub async fn take(
    tx: &mut sqlx::PgConnection,
    token_sha256: &[u8],
) -> Result<Result<Uuid, Refusal>, StoreError> {
    let taken: Option<Uuid> = sqlx::query_scalar(
        "UPDATE password_resets SET used_at = now()
         WHERE token_sha256 = $1 AND used_at IS NULL AND expires_at > now()
         RETURNING user_id",
    )
    .bind(token_sha256)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(user_id) = taken {
        // Links another confirmation holds are skipped rather than waited for: two links
        // of one user confirmed at once would otherwise deadlock, and that one marks its own.
        sqlx::query(
            "UPDATE password_resets SET used_at = now()
             WHERE token_sha256 IN (
               SELECT token_sha256 FROM password_resets
               WHERE user_id = $1 AND used_at IS NULL FOR UPDATE SKIP LOCKED)",
        )
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        return Ok(Ok(user_id));
    }
    let seen: Option<bool> = sqlx::query_scalar(
        "SELECT used_at IS NOT NULL FROM password_resets WHERE token_sha256 = $1",
    )
    .bind(token_sha256)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(Err(match seen {
        None => Refusal::Unknown,
        Some(true) => Refusal::Used,
        Some(false) => Refusal::Expired,
    }))
}
