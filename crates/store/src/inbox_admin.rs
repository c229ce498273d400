//! What operators do with the inbox: list and inspect events, replay a parked one, count the
//! parked ones for `/metrics`, and prune processed events past their retention.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgPool, Postgres, QueryBuilder};
use std::time::Duration;
use switchboard_domain::ChannelKind;
use uuid::Uuid;

pub use switchboard_domain::InboundStatus as EventStatus;

/// The condition selecting events in state `status`.
fn condition(status: EventStatus) -> &'static str {
    match status {
        EventStatus::Processed => "processed_at IS NOT NULL",
        EventStatus::Parked => "processed_at IS NULL AND parked_at IS NOT NULL",
        EventStatus::Processing => {
            "processed_at IS NULL AND parked_at IS NULL AND locked_until > now()"
        }
        EventStatus::Pending => {
            "processed_at IS NULL AND parked_at IS NULL AND (locked_until IS NULL OR locked_until <= now())"
        }
    }
}

const STATUS: &str = "CASE WHEN processed_at IS NOT NULL THEN 'processed'
     WHEN parked_at IS NOT NULL THEN 'parked'
     WHEN locked_until > now() THEN 'processing' ELSE 'pending' END";

const COLUMNS: &str = "id, org_id, connection_id, channel, dedup_key, attempts, last_error,
     received_at, retry_at, parked_at, processed_at";

/// One event as the admin list shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EventRow {
    /// Primary key.
    pub id: Uuid,
    /// Owning org.
    pub org_id: Uuid,
    /// The connection it arrived on.
    pub connection_id: Uuid,
    /// Its channel.
    pub channel: ChannelKind,
    /// The provider's dedup key.
    pub dedup_key: String,
    /// Where it stands.
    pub status: EventStatus,
    /// Failed attempts.
    pub attempts: i32,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// When the webhook was accepted.
    pub received_at: DateTime<Utc>,
    /// Not retried before this.
    pub retry_at: Option<DateTime<Utc>>,
    /// When it was parked.
    pub parked_at: Option<DateTime<Utc>>,
    /// When it was handled.
    pub processed_at: Option<DateTime<Utc>>,
}

/// One event with its payload and what it became.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EventDetail {
    /// The list columns.
    #[sqlx(flatten)]
    pub row: EventRow,
    /// `{"message": …|null, "raw": …}` as stored.
    pub payload: Value,
    /// The message the event became, once stored.
    pub message_id: Option<Uuid>,
    /// That message's conversation.
    pub conversation_id: Option<Uuid>,
}

/// Which events to list: newest first, keyset-paged on (received_at, id).
#[derive(Debug, Clone)]
pub struct EventFilter {
    /// The orgs to cover.
    pub orgs: Vec<Uuid>,
    /// Only events in this state.
    pub status: Option<EventStatus>,
    /// Only events of this channel.
    pub channel: Option<ChannelKind>,
    /// Continue after this key.
    pub before: Option<(DateTime<Utc>, Uuid)>,
    /// Rows to fetch.
    pub limit: i64,
}

/// The events `filter` selects.
pub async fn list(pool: &PgPool, filter: &EventFilter) -> Result<Vec<EventRow>, StoreError> {
    let mut q: QueryBuilder<'_, Postgres> = QueryBuilder::new(format!(
        "SELECT {COLUMNS}, {STATUS} AS status FROM inbound_events WHERE org_id = ANY("
    ));
    q.push_bind(&filter.orgs).push(")");
    if let Some(status) = filter.status {
        q.push(" AND ").push(condition(status));
    }
    if let Some(channel) = filter.channel {
        q.push(" AND channel = ").push_bind(channel);
    }
    if let Some((at, id)) = filter.before {
        q.push(" AND (received_at, id) < (")
            .push_bind(at)
            .push(", ")
            .push_bind(id)
            .push(")");
    }
    q.push(" ORDER BY received_at DESC, id DESC LIMIT ")
        .push_bind(filter.limit);
    Ok(q.build_query_as().fetch_all(pool).await?)
}

/// The org of event `id`, if it exists.
pub async fn org_of(pool: &PgPool, id: Uuid) -> Result<Option<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT org_id FROM inbound_events WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Event `id` with its payload and the message it became (found by the message's identity,
/// which the payload carries).
pub async fn detail(pool: &PgPool, id: Uuid) -> Result<Option<EventDetail>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {cols}, {STATUS} AS status, e.payload, m.id AS message_id,
                m.conversation_id
         FROM inbound_events e
         LEFT JOIN messages m ON m.org_id = e.org_id AND m.channel = e.channel
              AND m.channel_message_id = e.payload -> 'message' ->> 'channel_message_id'
         WHERE e.id = $1",
        cols = COLUMNS
            .split(',')
            .map(|c| format!("e.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", "),
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// What a replay found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Unparked (if it was) with a fresh attempt budget; enqueue its job.
    Ready,
    /// Already processed: running the job again would change nothing.
    AlreadyProcessed,
    /// No such event.
    Missing,
}

/// Makes event `id` runnable again: unparked, attempts reset, no backoff. The lease of a job
/// holding it right now is left alone.
pub async fn replay(pool: &PgPool, id: Uuid) -> Result<Replay, StoreError> {
    let found: Option<bool> = sqlx::query_scalar(
        "WITH reset AS (
           UPDATE inbound_events SET parked_at = NULL, attempts = 0, retry_at = NULL
           WHERE id = $1 AND processed_at IS NULL RETURNING id
         )
         SELECT EXISTS (SELECT 1 FROM reset) FROM inbound_events WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(match found {
        None => Replay::Missing,
        Some(true) => Replay::Ready,
        Some(false) => Replay::AlreadyProcessed,
    })
}

/// How many events are parked across all orgs.
pub async fn count_parked(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM inbound_events WHERE parked_at IS NOT NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// Deletes up to `chunk` processed events received more than `retention` ago; returns how
/// many went. Unprocessed and parked events are never pruned.
pub async fn prune_processed(
    pool: &PgPool,
    retention: Duration,
    chunk: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM inbound_events WHERE id IN (
           SELECT id FROM inbound_events
           WHERE received_at < now() - make_interval(secs => $1) AND processed_at IS NOT NULL
           LIMIT $2)",
    )
    .bind(retention.as_secs_f64())
    .bind(chunk)
    .execute(pool)
    .await?
    .rows_affected())
}
