//! The realtime event outbox: a flow stores its events here inside the transaction that
//! causes them, so an event exists exactly when its cause committed. The realtime relay
//! numbers and publishes them; nothing on this path touches a per-org counter.

use crate::StoreError;
use serde_json::Value;
use sqlx::PgExecutor;
use switchboard_domain::Event;
use uuid::Uuid;

/// Stores `events` of `org_id` (in order) with the caller's executor, usually its open
/// transaction.
pub async fn enqueue<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    events: &[Event],
) -> Result<(), StoreError> {
    let rows: Vec<(Uuid, &Event)> = events.iter().map(|e| (org_id, e)).collect();
    insert(db, &rows).await
}

/// Stores events of several orgs at once (in order), e.g. what a pod emits outside any
/// business transaction.
pub async fn enqueue_many<'e>(
    db: impl PgExecutor<'e>,
    events: &[(Uuid, Event)],
) -> Result<(), StoreError> {
    let rows: Vec<(Uuid, &Event)> = events.iter().map(|(o, e)| (*o, e)).collect();
    insert(db, &rows).await
}

async fn insert<'e>(db: impl PgExecutor<'e>, events: &[(Uuid, &Event)]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let orgs: Vec<Uuid> = events.iter().map(|(o, _)| *o).collect();
    let (names, payloads) = columns(events.iter().map(|(_, e)| *e))?;
    sqlx::query(
        "INSERT INTO event_outbox (org_id, event, payload)
         SELECT o, e, p FROM UNNEST($1::uuid[], $2::text[], $3::jsonb[]) WITH ORDINALITY AS t(o, e, p, i)
         ORDER BY i",
    )
    .bind(&orgs)
    .bind(&names)
    .bind(&payloads)
    .execute(db)
    .await?;
    Ok(())
}

/// The `event` and `payload` columns of one event, for the statements that store it with
/// their own write (a delivery outcome).
pub(crate) fn row(event: &Event) -> Result<(&'static str, Value), StoreError> {
    Ok((
        event.kind().as_str(),
        event.payload().map_err(StoreError::Payload)?,
    ))
}

/// The `event` and `payload` columns of `events`, for the statements that insert them (here
/// and with an audit row).
pub(crate) fn columns<'a>(
    events: impl Iterator<Item = &'a Event>,
) -> Result<(Vec<&'static str>, Vec<Value>), StoreError> {
    events
        .map(row)
        .collect::<Result<Vec<_>, StoreError>>()
        .map(|rows| rows.into_iter().unzip())
}

/// The `queue_item_*` payload of the expert-queue row aliased `q`, as SQL (see
/// `switchboard_domain::events::QueueItemEvent`).
pub const QUEUE_ITEM_PAYLOAD_SQL: &str = "jsonb_build_object('id', q.id, 'conversation_id', \
    q.conversation_id, 'status', q.status, 'version', q.version, 'claimed_by', q.claimed_by, \
    'flagged_for_review', q.flagged_for_review, 'send_at', q.send_at, 'autopilot_rule', \
    q.autopilot_rule)";

/// One outbox row taken by the relay.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    /// Its place in the outbox (commit order within a pod's writes).
    pub id: i64,
    /// Its org.
    pub org_id: Uuid,
    /// The event name.
    pub event: String,
    /// Its payload.
    pub payload: Value,
}

/// Deletes and returns up to `batch` of the oldest rows, in `id` order, only while
/// `holder` still holds the relay lease: a relay that stalled past its lease moves nothing,
/// so two relays never number at once.
pub async fn take_under_lease(
    tx: &mut sqlx::PgConnection,
    batch: i64,
    holder: Uuid,
) -> Result<Vec<Taken>, sqlx::Error> {
    let mut rows: Vec<(i64, Uuid, String, Value)> = sqlx::query_as(
        "DELETE FROM event_outbox WHERE id IN (
           SELECT id FROM event_outbox ORDER BY id LIMIT $1)
         AND EXISTS (SELECT 1 FROM relay_lease WHERE holder = $2 AND locked_until > now())
         RETURNING id, org_id, event, payload",
    )
    .bind(batch)
    .bind(holder)
    .fetch_all(tx)
    .await?;
    rows.sort_by_key(|r| r.0);
    Ok(rows
        .into_iter()
        .map(|(id, org_id, event, payload)| Taken {
            id,
            org_id,
            event,
            payload,
        })
        .collect())
}
