//! `saved_replies`: an org's snippets for the reply box, kept by its admins. A name is one
//! reply per org (`saved_replies_name_key`, case-insensitive): a create or rename onto a
//! taken name is [`StoreError::Conflict`], whichever pod wins the race.

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

/// A stored saved reply.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SavedReply {
    /// Primary key.
    pub id: Uuid,
    /// The org it belongs to.
    pub org_id: Uuid,
    /// What the picker matches.
    pub name: String,
    /// The text, with its placeholders.
    pub body: String,
    /// The admin who created it.
    pub created_by: Option<Uuid>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, org_id, name, body, created_by, created_at, updated_at";

/// The org's saved replies, by name.
pub async fn list<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
) -> Result<Vec<SavedReply>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM saved_replies WHERE org_id = $1 ORDER BY lower(name), id"
    ))
    .bind(org_id)
    .fetch_all(db)
    .await?)
}

/// Stores a new saved reply; [`StoreError::Conflict`] when the org has one of that name.
pub async fn insert<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    name: &str,
    body: &str,
    created_by: Uuid,
) -> Result<SavedReply, StoreError> {
    Ok(sqlx::query_as(&format!(
        "INSERT INTO saved_replies (org_id, name, body, created_by) VALUES ($1, $2, $3, $4)
         RETURNING {COLUMNS}"
    ))
    .bind(org_id)
    .bind(name)
    .bind(body)
    .bind(created_by)
    .fetch_one(db)
    .await?)
}

/// Changes the name and/or body of the org's saved reply `id`; `None` when the org has no
/// such reply.
pub async fn update<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    id: Uuid,
    name: Option<&str>,
    body: Option<&str>,
) -> Result<Option<SavedReply>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "UPDATE saved_replies SET name = coalesce($3, name), body = coalesce($4, body),
                updated_at = now()
         WHERE org_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ))
    .bind(org_id)
    .bind(id)
    .bind(name)
    .bind(body)
    .fetch_optional(db)
    .await?)
}

/// Deletes the org's saved reply `id`; its name when there was one.
pub async fn delete<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    id: Uuid,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar(
            "DELETE FROM saved_replies WHERE org_id = $1 AND id = $2 RETURNING name",
        )
        .bind(org_id)
        .bind(id)
        .fetch_optional(db)
        .await?,
    )
}
