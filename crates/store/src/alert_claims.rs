//! `alert_claims`: the claim that makes one pod raise an alert per window when Redis, the
//! usual claim, is unreachable.

use crate::StoreError;
use crate::cron_runs::secs;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use std::time::Duration;

/// Deletes alert claims older than `keep`.
pub async fn prune(pool: &PgPool, keep: Duration) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM alert_claims WHERE window_start < now() - make_interval(secs => $1)",
    )
    .bind(secs(keep))
    .execute(pool)
    .await?
    .rows_affected())
}

/// Claims alert (`kind`, `subject`) for the window starting at `window_start`: `true` for
/// exactly one pod. Used when Redis, the usual claim, is unreachable.
pub async fn claim(
    pool: &PgPool,
    kind: &str,
    subject: &str,
    window_start: DateTime<Utc>,
    pod_id: &str,
) -> Result<bool, StoreError> {
    let won: Option<String> = sqlx::query_scalar(
        "INSERT INTO alert_claims (kind, subject, window_start, pod_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING RETURNING kind",
    )
    .bind(kind)
    .bind(subject)
    .bind(window_start)
    .bind(pod_id)
    .fetch_optional(pool)
    .await?;
    Ok(won.is_some())
}
