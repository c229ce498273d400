//! `conversation_notes`: experts' internal notes on a conversation. A table of its own, not
//! `messages`: the outbox and the dispatch job read `messages`, the inbound job builds the
//! agent's history and `history_summary` from `messages` and the conversation row
//! (`switchboard_flows::inbound`), so nothing here can ever reach a customer or the agent.

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

/// A stored note, with its author's address for the console.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Note {
    /// Primary key.
    pub id: Uuid,
    /// The org.
    pub org_id: Uuid,
    /// The conversation.
    pub conversation_id: Uuid,
    /// Who wrote it (gone when the user was deleted).
    pub author_user_id: Option<Uuid>,
    /// The author's email, when known.
    pub author_email: Option<String>,
    /// The text.
    pub body: String,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

/// Stores a note on `conversation_id` of `org_id`.
pub async fn insert<'e>(
    db: impl PgExecutor<'e>,
    org_id: Uuid,
    conversation_id: Uuid,
    author: Uuid,
    body: &str,
) -> Result<Note, StoreError> {
    Ok(sqlx::query_as(
        "WITH n AS (
           INSERT INTO conversation_notes (org_id, conversation_id, author_user_id, body)
           VALUES ($1, $2, $3, $4)
           RETURNING id, org_id, conversation_id, author_user_id, body, created_at)
         SELECT n.*, u.email AS author_email FROM n LEFT JOIN users u ON u.id = n.author_user_id",
    )
    .bind(org_id)
    .bind(conversation_id)
    .bind(author)
    .bind(body)
    .fetch_one(db)
    .await?)
}

/// The conversation's notes, oldest first (a conversation holds few; `limit` bounds them).
pub async fn list<'e>(
    db: impl PgExecutor<'e>,
    conversation_id: Uuid,
    limit: i64,
) -> Result<Vec<Note>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM (
           SELECT n.id, n.org_id, n.conversation_id, n.author_user_id, n.body, n.created_at,
                  u.email AS author_email
           FROM conversation_notes n LEFT JOIN users u ON u.id = n.author_user_id
           WHERE n.conversation_id = $1
           ORDER BY n.created_at DESC, n.id DESC LIMIT $2) newest
         ORDER BY created_at, id",
    )
    .bind(conversation_id)
    .bind(limit)
    .fetch_all(db)
    .await?)
}
