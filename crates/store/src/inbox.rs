//! The durable inbox (`inbound_events`): what a webhook 2xx promises is stored here.

use crate::StoreError;
use crate::model::ChannelKind;
use serde_json::Value;
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// An accepted webhook event.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboundEvent {
    /// Primary key; the job argument.
    pub id: Uuid,
    /// Owning org.
    pub org_id: Uuid,
    /// The connection it arrived on.
    pub connection_id: Uuid,
    /// Its channel.
    pub channel: ChannelKind,
    /// Provider dedup key.
    pub dedup_key: String,
    /// Normalised payload: `{"message": …|null, "raw": …}`.
    pub payload: Value,
    /// Set once the job has fully handled the event.
    pub processed_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Inserts the event unless the connection already has one with this dedup key; returns the
/// new id, or `None` for a duplicate (AA3). `processed` stores events that need no work as
/// already handled.
pub async fn insert(
    pool: &PgPool,
    org_id: Uuid,
    connection_id: Uuid,
    channel: ChannelKind,
    dedup_key: &str,
    payload: &Value,
    processed: bool,
) -> Result<Option<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO inbound_events (org_id, connection_id, channel, dedup_key, payload, processed_at)
         VALUES ($1, $2, $3, $4, $5, CASE WHEN $6 THEN now() END)
         ON CONFLICT (connection_id, dedup_key) DO NOTHING
         RETURNING id",
    )
    .bind(org_id)
    .bind(connection_id)
    .bind(channel)
    .bind(dedup_key)
    .bind(payload)
    .bind(processed)
    .fetch_optional(pool)
    .await?)
}

/// Takes the event for `lease` if it is unprocessed and nobody holds it (one atomic
/// transition); `None` when it is processed, held by another worker, or gone.
pub async fn claim(
    pool: &PgPool,
    id: Uuid,
    lease: Duration,
) -> Result<Option<InboundEvent>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE inbound_events SET locked_until = now() + make_interval(secs => $2)
         WHERE id = $1 AND processed_at IS NULL AND (locked_until IS NULL OR locked_until < now())
         RETURNING id, org_id, connection_id, channel, dedup_key, payload, processed_at",
    )
    .bind(id)
    .bind(lease.as_secs_f64())
    .fetch_optional(pool)
    .await?)
}

/// Loads an event.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<InboundEvent>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, org_id, connection_id, channel, dedup_key, payload, processed_at
         FROM inbound_events WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// Counts an attempt, remembers the last error for operators, and gives the lease back so
/// the sweeper retries the event after the grace period.
pub async fn record_failure(pool: &PgPool, id: Uuid, error: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE inbound_events SET attempts = attempts + 1, last_error = $2, locked_until = NULL
         WHERE id = $1",
    )
    .bind(id)
    .bind(error)
    .execute(pool)
    .await?;
    Ok(())
}

/// Events still unprocessed after `grace`, oldest first: what the sweeper re-enqueues.
pub async fn stale_unprocessed(
    pool: &PgPool,
    grace: Duration,
    limit: i64,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM inbound_events
         WHERE processed_at IS NULL AND received_at < now() - make_interval(secs => $1)
           AND (locked_until IS NULL OR locked_until < now())
         ORDER BY received_at LIMIT $2",
    )
    .bind(grace.as_secs_f64())
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Claims a scheduled slot for `job` (AA2): `true` for exactly one pod per slot.
pub async fn claim_slot(
    pool: &PgPool,
    job: &str,
    slot: chrono::DateTime<chrono::Utc>,
    pod_id: &str,
) -> Result<bool, StoreError> {
    let won: Option<String> = sqlx::query_scalar(
        "INSERT INTO cron_runs (job, slot, pod_id) VALUES ($1, $2, $3)
         ON CONFLICT (job, slot) DO NOTHING RETURNING job",
    )
    .bind(job)
    .bind(slot)
    .bind(pod_id)
    .fetch_optional(pool)
    .await?;
    Ok(won.is_some())
}

/// Marks a claimed slot finished.
pub async fn finish_slot(
    pool: &PgPool,
    job: &str,
    slot: chrono::DateTime<chrono::Utc>,
    ok: bool,
    detail: Value,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE cron_runs SET finished_at = now(), status = $3, detail = $4
         WHERE job = $1 AND slot = $2",
    )
    .bind(job)
    .bind(slot)
    .bind(if ok { "ok" } else { "failed" })
    .bind(detail)
    .execute(pool)
    .await?;
    Ok(())
}
