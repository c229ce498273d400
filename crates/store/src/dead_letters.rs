//! The dead-letter table (`channel_failures`): replies whose delivery round failed for good,
//! as the dead-letter worker retries them, admins list and retry them, and alerts are raised.
//!
//! A retry hands the outbox row back to the `channel-outbound` job (`status = 'retry'`, due
//! now, a fresh round of attempts); the job records the result on all three rows (see
//! [`crate::outbox`]). Lock order as there: outbox row, message, dead-letter row.
//!
//! A dead reply's alert is claimed in its own row (`alerted_at`, set by one atomic
//! `UPDATE … WHERE alerted_at IS NULL RETURNING`) rather than in Redis: the claim must
//! survive a Redis flush, and the row is being written anyway.
//!
//! [`failures`] counts failed and dead work across both queues where it is stored (the inbox
//! and the dead letters), for the metrics sampler.

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use switchboard_domain::{ChannelKind, DeadLetterStatus};
use uuid::Uuid;

/// A dead letter as admins see it.
#[allow(missing_docs)] // the columns of SELECT
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeadLetter {
    pub id: Uuid,
    pub org_id: Uuid,
    pub outbox_id: Uuid,
    pub message_id: Uuid,
    pub conversation_id: Uuid,
    pub channel: ChannelKind,
    pub status: DeadLetterStatus,
    pub error: String,
    pub provider_status: Option<i32>,
    /// Failed provider attempts so far.
    pub attempts: i32,
    /// Dead-letter retries so far.
    pub retries: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub alerted_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const SELECT: &str = "SELECT f.id, f.org_id, f.outbox_id, o.message_id, o.conversation_id,
       f.channel, f.status, f.error, f.provider_status, f.attempts, f.retries,
       f.next_attempt_at, f.alerted_at, f.created_at, f.updated_at
FROM channel_failures f JOIN outbox o ON o.id = f.outbox_id";

/// A page of dead letters, newest first; `after` is the previous page's last
/// `(created_at, id)`.
#[allow(missing_docs)]
#[derive(Debug, Clone)]
pub struct Filter {
    pub orgs: Vec<Uuid>,
    pub status: Option<DeadLetterStatus>,
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
}

/// One page of dead letters.
pub async fn list(pool: &PgPool, filter: &Filter) -> Result<Vec<DeadLetter>, StoreError> {
    let (has_cursor, at, id) = match filter.after {
        Some((at, id)) => (true, at, id),
        None => (false, DateTime::<Utc>::UNIX_EPOCH, Uuid::nil()),
    };
    Ok(sqlx::query_as(&format!(
        "{SELECT}
         WHERE f.org_id = ANY($1) AND ($2::text IS NULL OR f.status = $2)
           AND ($3::bool = false OR (f.created_at, f.id) < ($4, $5))
         ORDER BY f.created_at DESC, f.id DESC LIMIT $6"
    ))
    .bind(&filter.orgs)
    .bind(filter.status)
    .bind(has_cursor)
    .bind(at)
    .bind(id)
    .bind(filter.limit)
    .fetch_all(pool)
    .await?)
}

/// One dead letter.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<DeadLetter>, StoreError> {
    Ok(sqlx::query_as(&format!("{SELECT} WHERE f.id = $1"))
        .bind(id)
        .fetch_optional(pool)
        .await?)
}

/// An outbox row handed back to the dispatch job by a retry.
#[allow(missing_docs)]
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Requeued {
    pub outbox_id: Uuid,
    pub org_id: Uuid,
    pub conversation_id: Uuid,
    pub message_id: Uuid,
    pub failure_id: Uuid,
    pub retries: i32,
}

/// Requeues the given outbox rows; `counts` adds one to the dead-letter retries. Only rows
/// still waiting (`failed`/`dead` outbox, `queued`/`dead` dead letter) move.
const REQUEUE: &str = "
  o AS (
    UPDATE outbox SET status = 'retry', attempts = 0, next_attempt_at = now(),
           locked_until = NULL, lease_id = NULL, updated_at = now()
    FROM picked WHERE outbox.id = picked.outbox_id AND outbox.status IN ('failed', 'dead')
    RETURNING outbox.id, outbox.org_id, outbox.conversation_id, outbox.message_id
  ), m AS (
    UPDATE messages SET delivery_status = 'retry' FROM o WHERE messages.id = o.message_id
    RETURNING messages.id
  ), f AS (
    UPDATE channel_failures SET status = 'retrying', updated_at = now(),
           retries = retries + CASE WHEN $2 THEN 1 ELSE 0 END
    FROM o WHERE channel_failures.outbox_id = o.id AND channel_failures.status IN ('queued', 'dead')
    RETURNING channel_failures.id, channel_failures.outbox_id, channel_failures.retries
  )
SELECT o.id AS outbox_id, o.org_id, o.conversation_id, o.message_id, f.id AS failure_id, f.retries
FROM o JOIN f ON f.outbox_id = o.id";

/// The dead-letter worker's pick: up to `limit` queued rows whose backoff is over, each
/// counted as one retry.
pub async fn requeue_due(tx: &mut PgConnection, limit: i64) -> Result<Vec<Requeued>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "WITH picked AS (
           SELECT outbox_id FROM channel_failures
           WHERE status = 'queued' AND next_attempt_at <= now()
           ORDER BY next_attempt_at LIMIT $1
         ), {REQUEUE}"
    ))
    .bind(limit)
    .bind(true)
    .fetch_all(&mut *tx)
    .await?)
}

/// An admin's retry of a `queued` or `dead` row, at once and without counting against the
/// automatic retries. `None` when the row is in no state to retry.
pub async fn retry_now(tx: &mut PgConnection, id: Uuid) -> Result<Option<Requeued>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "WITH picked AS (
           SELECT outbox_id FROM channel_failures
           WHERE id = $1::uuid AND status IN ('queued', 'dead')
         ), {REQUEUE}"
    ))
    .bind(id)
    .bind(false)
    .fetch_optional(&mut *tx)
    .await?)
}

/// A dead row whose alert this caller raises.
#[allow(missing_docs)]
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Alert {
    pub id: Uuid,
    pub org_id: Uuid,
    pub outbox_id: Uuid,
    pub channel: ChannelKind,
    pub error: String,
    pub provider_status: Option<i32>,
    pub attempts: i32,
    pub retries: i32,
}

/// Claims the alert of dead rows not alerted yet (`only` one row, or any): one atomic
/// statement, so however many pods ask, each row's alert is claimed once.
pub async fn claim_alerts(
    pool: &PgPool,
    only: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Alert>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE channel_failures SET alerted_at = now()
         WHERE id IN (SELECT id FROM channel_failures
                      WHERE status = 'dead' AND alerted_at IS NULL AND ($1::uuid IS NULL OR id = $1)
                      LIMIT $2)
           AND alerted_at IS NULL
         RETURNING id, org_id, outbox_id, channel, error, provider_status, attempts, retries",
    )
    .bind(only)
    .bind(limit)
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
