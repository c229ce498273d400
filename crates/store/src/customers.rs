//! Customers, a customer's conversations as the console's customer context shows them, and
//! everything held about a customer as their export reads it ([`export`]).

pub mod export;

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use switchboard_domain::ChannelKind;
use uuid::Uuid;

/// One customer record (one identity on one channel).
#[allow(missing_docs)] // the columns
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CustomerRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub channel: ChannelKind,
    pub external_id: String,
    pub display_name: Option<String>,
}

/// One customer by id, whatever its org (the caller checks the org).
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<CustomerRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, org_id, channel, external_id, display_name FROM customers WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// One of a customer's conversations with how it stands.
#[allow(missing_docs)] // the columns of the statement below
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CustomerConversationRow {
    pub id: Uuid,
    pub channel: ChannelKind,
    /// `open` or `closed`.
    pub status: String,
    /// The live queue item's status, or `resolved` when no item is live.
    pub outcome: String,
    pub queue_item_id: Option<Uuid>,
    pub last_message_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A page of `customer_id`'s conversations in `org_id`, newest activity first; `after` is
/// the `(updated_at, id)` of the previous page's last row. Every lookup is on an index:
/// `conversations_customer_recent` for the page, `expert_queue_one_live` for the live item,
/// `messages_conversation` for the last message.
pub async fn conversations(
    pool: &PgPool,
    org_id: Uuid,
    customer_id: Uuid,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<CustomerConversationRow>, StoreError> {
    let (has_cursor, at, id) = match after {
        Some((at, id)) => (true, at, id),
        None => (false, DateTime::<Utc>::UNIX_EPOCH, Uuid::nil()),
    };
    Ok(sqlx::query_as(
        "SELECT c.id, c.channel, c.status::text AS status,
                COALESCE(q.status::text, 'resolved') AS outcome, q.id AS queue_item_id,
                (SELECT m.created_at FROM messages m WHERE m.conversation_id = c.id
                 ORDER BY m.created_at DESC, m.id DESC LIMIT 1) AS last_message_at,
                c.created_at, c.updated_at
         FROM conversations c
         LEFT JOIN expert_queue q ON q.conversation_id = c.id AND q.status <> 'resolved'
         WHERE c.customer_id = $1 AND c.org_id = $2
           AND ($3::bool = false OR (c.updated_at, c.id) < ($4, $5))
         ORDER BY c.updated_at DESC, c.id DESC LIMIT $6",
    )
    .bind(customer_id)
    .bind(org_id)
    .bind(has_cursor)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}
