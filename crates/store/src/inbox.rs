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

/// An event to add to the inbox.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// Owning org.
    pub org_id: Uuid,
    /// The connection it arrived on.
    pub connection_id: Uuid,
    /// Its channel.
    pub channel: ChannelKind,
    /// Provider dedup key, unique per connection.
    pub dedup_key: String,
    /// Normalised payload.
    pub payload: Value,
    /// Store it as already handled (nothing to process).
    pub processed: bool,
}

/// Inserts many events in one statement and one commit; for each input, the new id or
/// `None` when it is a duplicate (of a stored event or of an earlier input in the batch).
/// One commit for many webhooks is what makes the accept path cheap (group commit).
pub async fn insert_batch(
    pool: &PgPool,
    events: &[NewEvent],
) -> Result<Vec<Option<Uuid>>, StoreError> {
    let mut orgs = Vec::with_capacity(events.len());
    let mut conns = Vec::with_capacity(events.len());
    let mut channels = Vec::with_capacity(events.len());
    let mut keys = Vec::with_capacity(events.len());
    let mut payloads = Vec::with_capacity(events.len());
    let mut done = Vec::with_capacity(events.len());
    for e in events {
        orgs.push(e.org_id);
        conns.push(e.connection_id);
        channels.push(e.channel.as_str());
        keys.push(e.dedup_key.as_str());
        payloads.push(&e.payload);
        done.push(e.processed);
    }
    let rows: Vec<(Uuid, Uuid, String)> = sqlx::query_as(
        "INSERT INTO inbound_events (org_id, connection_id, channel, dedup_key, payload, processed_at)
         SELECT o, c, ch::channel_kind, k, p, CASE WHEN d THEN now() END
         FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::jsonb[], $6::bool[])
              AS t(o, c, ch, k, p, d)
         ON CONFLICT (connection_id, dedup_key) DO NOTHING
         RETURNING id, connection_id, dedup_key",
    )
    .bind(&orgs)
    .bind(&conns)
    .bind(&channels)
    .bind(&keys)
    .bind(&payloads)
    .bind(&done)
    .fetch_all(pool)
    .await?;
    let mut inserted: std::collections::HashMap<(Uuid, String), Uuid> = rows
        .into_iter()
        .map(|(id, conn, key)| ((conn, key), id))
        .collect();
    // The first input with a key gets its id; repeats within the batch are duplicates.
    Ok(events
        .iter()
        .map(|e| inserted.remove(&(e.connection_id, e.dedup_key.clone())))
        .collect())
}

/// Takes the event for `lease` if it is unprocessed and nobody holds it (one atomic
/// transition); `None` when it is processed, held by another worker, or gone.
pub async fn claim<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: Uuid,
    lease: Duration,
) -> Result<Option<InboundEvent>, StoreError> {
    Ok(sqlx::query_as(CLAIM)
        .bind(id)
        .bind(lease.as_secs_f64())
        .fetch_optional(db)
        .await?)
}

/// The claim statement (`$1` event id, `$2` lease seconds); public so tests can check its
/// plan.
pub const CLAIM: &str = "UPDATE inbound_events SET locked_until = now() + make_interval(secs => $2)
     WHERE id = $1 AND processed_at IS NULL AND (locked_until IS NULL OR locked_until < now())
     RETURNING id, org_id, connection_id, channel, dedup_key, payload, processed_at";

/// Extends the lease of an event that is still being processed.
pub async fn renew(pool: &PgPool, id: Uuid, lease: Duration) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE inbound_events SET locked_until = now() + make_interval(secs => $2)
         WHERE id = $1 AND processed_at IS NULL",
    )
    .bind(id)
    .bind(lease.as_secs_f64())
    .execute(pool)
    .await?;
    Ok(())
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

/// Deletes `job`'s slot records older than `keep`; returns how many went. Each sweep removes
/// the few slots that aged out since the last one, so `cron_runs` stays small.
pub async fn prune_slots(pool: &PgPool, job: &str, keep: Duration) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM cron_runs WHERE job = $1 AND slot < now() - make_interval(secs => $2)",
    )
    .bind(job)
    .bind(keep.as_secs_f64())
    .execute(pool)
    .await?
    .rows_affected())
}
