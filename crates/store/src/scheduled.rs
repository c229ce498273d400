//! Statements of the scheduled jobs that act on the expert queue: snoozed items coming due,
//! the backlog past its SLA and the items flagged for review.

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use sqlx::PgPool;
use switchboard_domain::events::QueueItemEvent;
use uuid::Uuid;

/// A snoozed item that came due, as its `queue_item_updated` event says it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Resurfaced {
    /// The item's org.
    pub org_id: Uuid,
    /// The item after the change.
    #[sqlx(flatten)]
    pub item: QueueItemEvent,
}

const RESURFACE: &str = "UPDATE expert_queue q SET status = 'pending', snoozed_until = NULL,
        version = q.version + 1, updated_at = now()
     WHERE q.id IN (SELECT id FROM expert_queue
                    WHERE status = 'snoozed' AND snoozed_until <= now()
                    ORDER BY snoozed_until LIMIT $1 FOR UPDATE SKIP LOCKED)
       AND q.status = 'snoozed' AND q.snoozed_until <= now()
     RETURNING q.org_id, q.id, q.conversation_id, q.status, q.version, q.claimed_by,
               q.flagged_for_review";

/// Moves up to `limit` snoozed items whose time has come back to `pending`, in one
/// `UPDATE … RETURNING` (AA5: an item already moved by anyone else is not in the `WHERE`).
pub async fn resurface_snoozed(
    tx: &mut PgConnection,
    limit: i64,
) -> Result<Vec<Resurfaced>, StoreError> {
    Ok(sqlx::query_as(RESURFACE)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?)
}

/// One org's pending items past their SLA.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Backlog {
    /// The org.
    pub org_id: Uuid,
    /// How many pending items are past their SLA.
    pub overdue: i64,
    /// The item waiting longest past its SLA.
    pub oldest_id: Uuid,
    /// Its SLA.
    pub oldest_due_at: DateTime<Utc>,
}

/// Pending items past their `sla_due_at`, per org.
pub async fn backlog_past_sla(pool: &PgPool) -> Result<Vec<Backlog>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT org_id, count(*) AS overdue,
                (array_agg(id ORDER BY sla_due_at, id))[1] AS oldest_id,
                min(sla_due_at) AS oldest_due_at
         FROM expert_queue
         WHERE status = 'pending' AND sla_due_at < now()
         GROUP BY org_id ORDER BY org_id",
    )
    .fetch_all(pool)
    .await?)
}

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
