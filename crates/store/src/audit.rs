//! The audit log: who did what, with the org, the target and the request id, in the
//! transaction of the action itself where it has one. Every expert action, connection
//! change, member removal, change of an org's settings, saved-reply change, internal note,
//! inbox replay, dead-letter retry and logout, the CLI's deactivations and reactivations,
//! and every login, success or failure (a hash of the email, never the password), write a
//! row.

use crate::StoreError;
use serde_json::Value;
use sqlx::PgExecutor;
use switchboard_domain::Event;
use uuid::Uuid;

/// Who acted, and through which request.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The org the action concerns.
    pub org_id: Option<Uuid>,
    /// The user, when known (a failed login has none).
    pub user_id: Option<Uuid>,
    /// The request's `x-request-id`.
    pub request_id: Option<&'a str>,
}

/// Appends an audit entry; takes any executor so it can join the caller's transaction.
pub async fn record<'e>(
    db: impl PgExecutor<'e>,
    actor: Actor<'_>,
    action: &str,
    target: Option<(&str, Uuid)>,
    details: Value,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details, request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(actor.org_id)
    .bind(actor.user_id)
    .bind(action)
    .bind(target.map(|t| t.0))
    .bind(target.map(|t| t.1))
    .bind(details)
    .bind(actor.request_id)
    .execute(db)
    .await?;
    Ok(())
}

/// Appends an audit entry and stores the action's realtime events (in order, for the relay)
/// in one statement, inside the action's transaction.
pub async fn record_with_events<'e>(
    db: impl PgExecutor<'e>,
    actor: Actor<'_>,
    action: &str,
    target: Option<(&str, Uuid)>,
    details: Value,
    events: &[Event],
) -> Result<(), StoreError> {
    let (names, payloads) = crate::event_outbox::columns(events.iter())?;
    sqlx::query(
        "WITH a AS (
           INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details,
                                  request_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7))
         INSERT INTO event_outbox (org_id, event, payload)
         SELECT $1, e, p FROM UNNEST($8::text[], $9::jsonb[]) WITH ORDINALITY AS t(e, p, i)
         WHERE $1 IS NOT NULL
         ORDER BY i",
    )
    .bind(actor.org_id)
    .bind(actor.user_id)
    .bind(action)
    .bind(target.map(|t| t.0))
    .bind(target.map(|t| t.1))
    .bind(details)
    .bind(actor.request_id)
    .bind(&names)
    .bind(&payloads)
    .execute(db)
    .await?;
    Ok(())
}
