//! `Idempotency-Key` replays (AA3): the first request with a key runs; a retry with the same
//! key and the same request gets the first response back, from any pod.
//!
//! A claim is held for a lease and then may be taken over (its request died, or is merely
//! slow); each claim writes a fresh `claim_token`, and storing the answer or giving the key
//! back names it, so the request that lost its claim writes nothing over the one that took it.

use crate::StoreError;
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use std::time::Duration;
use uuid::Uuid;

/// A key as the caller scoped it.
#[allow(missing_docs)] // the primary key's columns
#[derive(Debug, Clone, Copy)]
pub struct KeyRef<'a> {
    pub org_id: Uuid,
    pub user_id: Uuid,
    pub key: &'a str,
}

/// What the first request with a key left behind.
#[derive(Debug, Clone, PartialEq)]
pub enum Existing {
    /// This request now owns the key and runs; its later writes name `token`.
    Claimed {
        /// This claim's token (see [`complete`], [`release`]).
        token: Uuid,
    },
    /// Another request with this key is running (its lease has not run out).
    InProgress,
    /// The key was used for a different request (method, path or body).
    Mismatch,
    /// The first request finished; this is its response.
    Done {
        /// HTTP status.
        status: u16,
        /// JSON body.
        body: Value,
    },
}

/// Claims `key` for a request with `hash`, holding it for `lease` while it runs. A key whose
/// request died before finishing (lease run out, no response) is taken over.
pub async fn claim(
    pool: &PgPool,
    key: KeyRef<'_>,
    hash: &str,
    lease: Duration,
) -> Result<Existing, StoreError> {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX) as f64;
    let token = Uuid::new_v4();
    // The claim commits without waiting for its WAL flush (`set_config` is local to this one-statement transaction): the
    // request's own transaction flushes it when it commits, and a claim lost to a crash
    // before that only frees a key whose request left no effect.
    let claimed: Option<bool> = sqlx::query_scalar(concat!(
        crate::async_commit!(),
        "
         INSERT INTO idempotency_keys (org_id, user_id, key, request_hash, locked_until, claim_token)
         SELECT $1, $2, $3, $4, now() + make_interval(secs => $5 / 1000), $6 FROM async_commit
         ON CONFLICT (org_id, user_id, key) DO UPDATE
           SET request_hash = EXCLUDED.request_hash, locked_until = EXCLUDED.locked_until,
               claim_token = EXCLUDED.claim_token, created_at = now()
           WHERE idempotency_keys.response_status IS NULL
             AND idempotency_keys.locked_until < now()
             AND idempotency_keys.request_hash = EXCLUDED.request_hash
         RETURNING true"
    ))
    .bind(key.org_id)
    .bind(key.user_id)
    .bind(key.key)
    .bind(hash)
    .bind(lease_ms)
    .bind(token)
    .fetch_optional(pool)
    .await?;
    if claimed.is_some() {
        return Ok(Existing::Claimed { token });
    }
    let row: Option<(String, Option<i32>, Option<Value>)> = sqlx::query_as(
        "SELECT request_hash, response_status, response_body FROM idempotency_keys
         WHERE org_id = $1 AND user_id = $2 AND key = $3",
    )
    .bind(key.org_id)
    .bind(key.user_id)
    .bind(key.key)
    .fetch_optional(pool)
    .await?;
    Ok(match row {
        // Deleted in between (the first request failed and gave the key back): retry later.
        None => Existing::InProgress,
        Some((stored, _, _)) if stored != hash => Existing::Mismatch,
        Some((_, Some(status), body)) => Existing::Done {
            status: u16::try_from(status).unwrap_or(500),
            body: body.unwrap_or(Value::Null),
        },
        Some((_, None, _)) => Existing::InProgress,
    })
}

/// Stores the response of the request whose claim `token` names; with the caller's
/// transaction, the response commits together with the request's effect. `false` (nothing
/// written) when that claim is no longer the key's: it expired and a retry took the key over,
/// so the retry's answer stands and the caller's transaction should not commit its effect.
pub async fn complete<'e>(
    db: impl PgExecutor<'e>,
    key: KeyRef<'_>,
    token: Uuid,
    status: u16,
    body: &Value,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE idempotency_keys SET response_status = $4, response_body = $5
         WHERE org_id = $1 AND user_id = $2 AND key = $3 AND claim_token = $6
           AND response_status IS NULL",
    )
    .bind(key.org_id)
    .bind(key.user_id)
    .bind(key.key)
    .bind(i32::from(status))
    .bind(body)
    .bind(token)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Gives the key back (the request failed in a way a retry may fix), if the claim `token`
/// names still holds it; `false` (nothing deleted) when a retry has taken the key over.
pub async fn release(pool: &PgPool, key: KeyRef<'_>, token: Uuid) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "DELETE FROM idempotency_keys
         WHERE org_id = $1 AND user_id = $2 AND key = $3 AND claim_token = $4
           AND response_status IS NULL",
    )
    .bind(key.org_id)
    .bind(key.user_id)
    .bind(key.key)
    .bind(token)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes keys older than `keep`; returns how many went.
pub async fn expire(pool: &PgPool, keep: Duration) -> Result<u64, StoreError> {
    let keep_secs = keep.as_secs_f64();
    Ok(sqlx::query(
        "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)",
    )
    .bind(keep_secs)
    .execute(pool)
    .await?
    .rows_affected())
}
