//! An org's saved replies as its admins change them: each change with its audit row in one
//! transaction. Their names are unique per org; what a body may hold is the caller's check.

use crate::Deps;
use serde_json::json;
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor};
use switchboard_store::saved_replies::{self, SavedReply};
use uuid::Uuid;

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub enum SavedReplyError {
    /// The org has another saved reply of this name.
    #[error("a saved reply named {0:?} already exists")]
    NameTaken(String),
    /// The org has no such saved reply.
    #[error("no such saved reply")]
    NotFound,
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The store's unique-name refusal, as the name it was about.
fn name_taken(error: StoreError, name: &str) -> SavedReplyError {
    match error {
        StoreError::Conflict => SavedReplyError::NameTaken(name.to_owned()),
        other => other.into(),
    }
}

/// A new saved reply of `actor`'s org, written by `actor`.
pub async fn create(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    created_by: Uuid,
    name: &str,
    body: &str,
) -> Result<SavedReply, SavedReplyError> {
    let mut tx = deps.begin().await?;
    let reply = saved_replies::insert(&mut *tx, org_id, name, body, created_by)
        .await
        .map_err(|e| name_taken(e, name))?;
    let details = json!({"name": reply.name});
    audit::record(
        &mut *tx,
        actor,
        "saved_reply.created",
        Some(("saved_reply", reply.id)),
        details,
    )
    .await?;
    crate::commit(tx).await?;
    Ok(reply)
}

/// Renames saved reply `id` of `org_id`, changes its body, or both.
pub async fn update(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    id: Uuid,
    name: Option<&str>,
    body: Option<&str>,
) -> Result<SavedReply, SavedReplyError> {
    let mut tx = deps.begin().await?;
    let reply = saved_replies::update(&mut *tx, org_id, id, name, body)
        .await
        .map_err(|e| name_taken(e, name.unwrap_or_default()))?
        .ok_or(SavedReplyError::NotFound)?;
    let details =
        json!({"name": reply.name, "renamed": name.is_some(), "body_changed": body.is_some()});
    audit::record(
        &mut *tx,
        actor,
        "saved_reply.updated",
        Some(("saved_reply", reply.id)),
        details,
    )
    .await?;
    crate::commit(tx).await?;
    Ok(reply)
}

/// Deletes saved reply `id` of `org_id`.
pub async fn delete(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    id: Uuid,
) -> Result<(), SavedReplyError> {
    let mut tx = deps.begin().await?;
    let name = saved_replies::delete(&mut *tx, org_id, id)
        .await?
        .ok_or(SavedReplyError::NotFound)?;
    let details = json!({"name": name});
    audit::record(
        &mut *tx,
        actor,
        "saved_reply.deleted",
        Some(("saved_reply", id)),
        details,
    )
    .await?;
    crate::commit(tx).await?;
    Ok(())
}
