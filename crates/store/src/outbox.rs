//! Outbound replies: the expert's message and its `outbox` row, written in the release
//! transaction (SPEC §2), and the rows the outbox sweeper hands to `channel-outbound` again.

use crate::StoreError;
use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};
use std::time::Duration;
use uuid::Uuid;

/// Who wrote a reply: the agent (its draft, released unedited by an expert) or the expert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyAuthor {
    /// The agent's draft, as released.
    Agent,
    /// The expert's own or edited words.
    Expert,
}

impl ReplyAuthor {
    fn as_str(self) -> &'static str {
        match self {
            ReplyAuthor::Agent => "agent",
            ReplyAuthor::Expert => "expert",
        }
    }
}

/// A stored outbound message.
#[allow(missing_docs)] // the columns returned
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct NewReply {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
}

/// Inserts the outbound message of a conversation with delivery status `queued`.
pub async fn insert_reply<'e>(
    db: impl PgExecutor<'e>,
    conversation_id: Uuid,
    author: ReplyAuthor,
    user_id: Uuid,
    body: &str,
) -> Result<NewReply, StoreError> {
    sqlx::query_as(
        "INSERT INTO messages (org_id, conversation_id, direction, author, author_user_id, body,
                               channel, delivery_status)
         SELECT c.org_id, c.id, 'outbound', $2::message_author, $3, $4, c.channel, 'queued'
         FROM conversations c WHERE c.id = $1
         RETURNING id, created_at",
    )
    .bind(conversation_id)
    .bind(author.as_str())
    .bind(user_id)
    .bind(body)
    .fetch_one(db)
    .await
    .map_err(StoreError::classify)
}

/// Inserts the outbox row for `message_id`: addressed through the conversation's current
/// connection, to the reply target of the customer's latest message (see
/// `switchboard_domain::jobs::OutboxPayload`). Unique per message (AA3).
pub async fn insert<'e>(
    db: impl PgExecutor<'e>,
    conversation_id: Uuid,
    message_id: Uuid,
    text: &str,
) -> Result<Uuid, StoreError> {
    sqlx::query_scalar(
        "INSERT INTO outbox (org_id, conversation_id, message_id, connection_id, channel, payload)
         SELECT c.org_id, c.id, $2, c.connection_id, c.channel,
                jsonb_build_object(
                  'text', $3::text,
                  'customer_external_id', cu.external_id,
                  'reply_to', COALESCE((
                     SELECT m.reply_to FROM messages m
                     WHERE m.conversation_id = c.id AND m.direction = 'inbound' AND m.reply_to IS NOT NULL
                     ORDER BY m.created_at DESC, m.id DESC LIMIT 1), '{}'::jsonb))
         FROM conversations c JOIN customers cu ON cu.id = c.customer_id
         WHERE c.id = $1
         RETURNING id",
    )
    .bind(conversation_id)
    .bind(message_id)
    .bind(text)
    .fetch_one(db)
    .await
    .map_err(StoreError::classify)
}

/// Rows still to send whose due time passed `grace` ago and that no worker holds: their job
/// was lost (Redis flushed, pod killed before the push) or their lease ran out.
pub async fn stale_unsent(
    pool: &PgPool,
    grace: Duration,
    limit: i64,
) -> Result<Vec<Uuid>, StoreError> {
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    Ok(sqlx::query_scalar(
        "SELECT id FROM outbox
         WHERE status IN ('queued', 'retry')
           AND next_attempt_at < now() - make_interval(secs => $1::float8 / 1000)
           AND (locked_until IS NULL OR locked_until < now())
         ORDER BY next_attempt_at LIMIT $2",
    )
    .bind(grace_ms as f64)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}
