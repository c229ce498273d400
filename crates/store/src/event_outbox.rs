//! The realtime event outbox: a flow stores its events here inside the transaction that
//! causes them, so an event exists exactly when its cause committed. The realtime relay
//! numbers and publishes them; nothing on this path touches a per-org counter.

use crate::StoreError;
use serde_json::Value;
use sqlx::PgExecutor;
use switchboard_domain::EventKind;
use uuid::Uuid;

/// Stores `events` of `org_id` (in order) with the caller's executor, usually its open
/// transaction.
pub async fn enqueue<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    events: &[(EventKind, Value)],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    let payloads: Vec<&Value> = events.iter().map(|(_, p)| p).collect();
    sqlx::query(
        "INSERT INTO event_outbox (org_id, event, payload)
         SELECT $1, e, p FROM UNNEST($2::text[], $3::jsonb[]) WITH ORDINALITY AS t(e, p, i)
         ORDER BY i",
    )
    .bind(org_id)
    .bind(&names)
    .bind(&payloads)
    .execute(db)
    .await?;
    Ok(())
}

/// Stores events of several orgs at once (in order), e.g. what a pod emits outside any
/// business transaction.
pub async fn enqueue_many<'e>(
    db: impl PgExecutor<'e>,
    events: &[(Uuid, EventKind, Value)],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let orgs: Vec<Uuid> = events.iter().map(|(o, _, _)| *o).collect();
    let names: Vec<&str> = events.iter().map(|(_, k, _)| k.as_str()).collect();
    let payloads: Vec<&Value> = events.iter().map(|(_, _, p)| p).collect();
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

/// The `queue_item_*` payload of the expert-queue row aliased `q`, as SQL (see
/// `switchboard_domain::events::QueueItemEvent`).
pub const QUEUE_ITEM_PAYLOAD_SQL: &str = "jsonb_build_object('id', q.id, 'conversation_id', \
    q.conversation_id, 'status', q.status, 'version', q.version, 'claimed_by', q.claimed_by, \
    'flagged_for_review', q.flagged_for_review)";
