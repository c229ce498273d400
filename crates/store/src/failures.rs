//! Failed and dead work across both queues, counted where it is stored (the inbox and the
//! dead letters), for the metrics sampler.

use crate::StoreError;
use sqlx::PgPool;

/// Failed and dead work per queue, as Postgres (the truth) sees it: `channel-inbound` events
/// that failed and wait for a retry, and parked ones; `channel-outbound` dead letters
/// waiting for a retry, and dead ones.
#[derive(Debug, Clone, Copy, Default, sqlx::FromRow)]
pub struct Failures {
    /// Inbound events with failed attempts, not parked.
    pub inbound_failed: i64,
    /// Parked inbound events.
    pub inbound_dead: i64,
    /// Dead letters queued for a retry.
    pub outbound_failed: i64,
    /// Dead replies.
    pub outbound_dead: i64,
}

/// Counts [`Failures`] (each through a partial index, except the dead replies, which are few).
pub async fn failures(pool: &PgPool) -> Result<Failures, StoreError> {
    Ok(sqlx::query_as(
        "SELECT (SELECT count(*) FROM inbound_events
                 WHERE processed_at IS NULL AND parked_at IS NULL AND received_at IS NOT NULL
                   AND attempts > 0) AS inbound_failed,
                (SELECT count(*) FROM inbound_events WHERE parked_at IS NOT NULL) AS inbound_dead,
                (SELECT count(*) FROM channel_failures WHERE status = 'queued') AS outbound_failed,
                (SELECT count(*) FROM channel_failures WHERE status = 'dead') AS outbound_dead",
    )
    .fetch_one(pool)
    .await?)
}

/// Inbound events accepted and not yet processed (nor parked), counted up to `cap`: the
/// inbox backlog the queue alert compares with `ALERT_QUEUE_WAITING`, bounded so that a
/// large backlog costs no more to count than the threshold.
pub async fn inbox_waiting(pool: &PgPool, cap: i64) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM (
           SELECT 1 FROM inbound_events WHERE processed_at IS NULL AND parked_at IS NULL
           LIMIT $1) AS waiting",
    )
    .bind(cap)
    .fetch_one(pool)
    .await?)
}
