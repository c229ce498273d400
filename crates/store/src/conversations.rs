//! Conversations and their messages, as the console reads them.

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use switchboard_domain::{Author, ChannelKind, DeliveryStatus};
use uuid::Uuid;

/// A conversation with its customer.
#[allow(missing_docs)] // the columns of CONVERSATION_SELECT
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ConversationRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub channel: ChannelKind,
    pub connection_id: Uuid,
    pub status: String,
    pub customer_id: Uuid,
    pub customer_name: Option<String>,
    pub customer_external_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const CONVERSATION_SELECT: &str = "
SELECT c.id, c.org_id, c.channel, c.connection_id, c.status::text AS status,
       cu.id AS customer_id, cu.display_name AS customer_name, cu.external_id AS customer_external_id,
       c.created_at, c.updated_at
FROM conversations c JOIN customers cu ON cu.id = c.customer_id";

/// A conversation list query, newest activity first; `after` is the `(updated_at, id)` of
/// the previous page's last row.
#[allow(missing_docs)] // the statement's parameters
#[derive(Debug, Clone)]
pub struct ConversationFilter {
    pub orgs: Vec<Uuid>,
    pub status: Option<String>,
    pub channel: Option<ChannelKind>,
    pub customer_id: Option<Uuid>,
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
}

/// One page of conversations.
pub async fn list(
    pool: &PgPool,
    filter: &ConversationFilter,
) -> Result<Vec<ConversationRow>, StoreError> {
    let (has_cursor, at, id) = match filter.after {
        Some((at, id)) => (true, at, id),
        None => (false, DateTime::<Utc>::UNIX_EPOCH, Uuid::nil()),
    };
    Ok(sqlx::query_as(&format!(
        "{CONVERSATION_SELECT}
         WHERE c.org_id = ANY($1)
           AND ($2::text IS NULL OR c.status::text = $2)
           AND ($3::channel_kind IS NULL OR c.channel = $3)
           AND ($4::uuid IS NULL OR c.customer_id = $4)
           AND ($5::bool = false OR (c.updated_at, c.id) < ($6, $7))
         ORDER BY c.updated_at DESC, c.id DESC LIMIT $8"
    ))
    .bind(&filter.orgs)
    .bind(&filter.status)
    .bind(filter.channel)
    .bind(filter.customer_id)
    .bind(has_cursor)
    .bind(at)
    .bind(id)
    .bind(filter.limit)
    .fetch_all(pool)
    .await?)
}

/// One conversation by id, whatever its org (the caller checks the org).
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<ConversationRow>, StoreError> {
    Ok(
        sqlx::query_as(&format!("{CONVERSATION_SELECT} WHERE c.id = $1"))
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// A message as the conversation view shows it; outbound ones carry their delivery.
#[allow(missing_docs)] // the columns of the statement below
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MessageRow {
    pub id: Uuid,
    pub direction: String,
    pub author: Author,
    pub author_user_id: Option<Uuid>,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub delivery_status: Option<DeliveryStatus>,
    pub provider_message_id: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub delivery_error: Option<String>,
    /// A reply's draft: what the agent proposed for the customer message it answers (not
    /// the fallback), for comparing with what was sent.
    pub draft: Option<String>,
}

/// Up to `limit` messages of a conversation older than message `before` (newest first);
/// without `before`, the newest ones. A `before` from another conversation matches nothing.
pub async fn messages(
    pool: &PgPool,
    conversation_id: Uuid,
    before: Option<Uuid>,
    limit: i64,
) -> Result<Vec<MessageRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT m.id, m.direction::text AS direction, m.author, m.author_user_id,
                m.body, m.created_at, m.delivery_status, m.provider_message_id, m.delivered_at,
                m.delivery_error,
                (SELECT d.body FROM drafts d
                 WHERE m.direction = 'outbound' AND d.message_id = m.answers_message_id
                   AND NOT d.fallback) AS draft
         FROM messages m
         WHERE m.conversation_id = $1
           AND ($2::uuid IS NULL OR (m.created_at, m.id) < (
                SELECT b.created_at, b.id FROM messages b WHERE b.id = $2 AND b.conversation_id = $1))
         ORDER BY m.created_at DESC, m.id DESC LIMIT $3",
    )
    .bind(conversation_id)
    .bind(before)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// The id of the conversation's live (not resolved) queue item, if any.
pub async fn live_item(pool: &PgPool, conversation_id: Uuid) -> Result<Option<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM expert_queue WHERE conversation_id = $1 AND status <> 'resolved'",
    )
    .bind(conversation_id)
    .fetch_optional(pool)
    .await?)
}

/// `context` (an `agent_context` column) with `$entry` appended to its `history_summary`,
/// keeping the last `$keep` entries; `{entry}` and `{keep}` name the parameters. Used only
/// where the conversation row is being written, so concurrent jobs serialise on its row
/// lock and no entry is lost.
pub(crate) fn history_append(context: &str, entry: &str, keep: &str) -> String {
    format!(
        "jsonb_set({context}, '{{history_summary}}',
           (SELECT COALESCE(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM (
              SELECT e, i FROM jsonb_array_elements(
                COALESCE({context} -> 'history_summary', '[]'::jsonb) || jsonb_build_array({entry}::jsonb)
              ) WITH ORDINALITY AS t(e, i)
              ORDER BY i DESC LIMIT {keep}) last_entries))"
    )
}
