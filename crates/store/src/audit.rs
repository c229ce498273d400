//! The audit log.

use crate::StoreError;
use serde_json::Value;
use sqlx::PgExecutor;
use uuid::Uuid;

/// Appends an audit entry; takes any executor so it can join the caller's transaction.
pub async fn record<'e>(
    db: impl PgExecutor<'e>,
    org_id: Option<Uuid>,
    actor: Option<Uuid>,
    action: &str,
    target: Option<(&str, Uuid)>,
    details: Value,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_log (org_id, actor_user_id, action, target_type, target_id, details)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(org_id)
    .bind(actor)
    .bind(action)
    .bind(target.map(|t| t.0))
    .bind(target.map(|t| t.1))
    .bind(details)
    .execute(db)
    .await?;
    Ok(())
}
