//! Outbound replies: the expert's message and its `outbox` row, written in the release
//! transaction (SPEC §2), and the rows the outbox sweeper hands to `channel-outbound` again.

use crate::StoreError;
use sqlx::{PgExecutor, PgPool};
use std::time::Duration;
use switchboard_domain::Author;
use switchboard_domain::trace::TraceParent;
use uuid::Uuid;

/// An outbound reply to store with its outbox row.
#[derive(Debug, Clone, Copy)]
pub struct NewReply<'a> {
    /// The message's id, chosen by the caller so its events can name it in the same
    /// statement.
    pub message_id: Uuid,
    /// The conversation answered.
    pub conversation_id: Uuid,
    /// Agent (an unedited draft) or expert.
    pub author: Author,
    /// The expert who released or wrote it; none when the autopilot sent it.
    pub user_id: Option<Uuid>,
    /// The text.
    pub body: &'a str,
    /// The latest customer message the release saw: what this reply answers.
    pub answers: Option<Uuid>,
}

/// The outbox row [`insert_reply`] wrote.
#[derive(Debug, Clone, Copy)]
pub struct Inserted {
    /// Its id, the `channel-outbound` job's argument.
    pub outbox_id: Uuid,
    /// The trace context of the customer message the reply answers (its inbound event's
    /// trace), when it was traced: the release's trace links to it.
    pub answers_trace: Option<TraceParent>,
}

/// Inserts the outbound message (delivery status `queued`, `created_at` the transaction's
/// `now()`) and its outbox row in one statement. The row is addressed through the
/// conversation's current connection, to the reply target of the customer's latest message
/// (see `switchboard_domain::jobs::OutboxPayload`), and is unique per message (AA3). It
/// keeps the trace context of the span writing it (the release's, for the dispatch to
/// continue) and of the message it answers (for the link back to the event's trace).
pub async fn insert_reply<'e>(
    db: impl PgExecutor<'e>,
    reply: NewReply<'_>,
) -> Result<Inserted, StoreError> {
    let traceparent = switchboard_domain::trace::current().map(|t| t.to_string());
    let (outbox_id, answers): (Uuid, Option<String>) = sqlx::query_as(
        "WITH m AS (
           INSERT INTO messages (id, org_id, conversation_id, direction, author, author_user_id,
                                 body, channel, delivery_status, answers_message_id)
           SELECT $1, c.org_id, c.id, 'outbound', $3::message_author, $4, $5, c.channel, 'queued', $6
           FROM conversations c WHERE c.id = $2
           RETURNING id, org_id, conversation_id)
         INSERT INTO outbox (org_id, conversation_id, message_id, connection_id, channel, payload,
                             traceparent, answers_traceparent)
         SELECT c.org_id, c.id, m.id, c.connection_id, c.channel,
                jsonb_build_object(
                  'text', $5::text,
                  'customer_external_id', cu.external_id,
                  'reply_to', COALESCE((
                     SELECT r.reply_to FROM messages r
                     WHERE r.conversation_id = c.id AND r.direction = 'inbound' AND r.reply_to IS NOT NULL
                     ORDER BY r.created_at DESC, r.id DESC LIMIT 1), '{}'::jsonb)),
                $7, (SELECT a.traceparent FROM messages a WHERE a.id = $6)
         FROM m JOIN conversations c ON c.id = m.conversation_id
         JOIN customers cu ON cu.id = c.customer_id
         RETURNING id, answers_traceparent",
    )
    .bind(reply.message_id)
    .bind(reply.conversation_id)
    .bind(reply.author.as_str())
    .bind(reply.user_id)
    .bind(reply.body)
    .bind(reply.answers)
    .bind(traceparent)
    .fetch_one(db)
    .await?;
    Ok(Inserted {
        outbox_id,
        answers_trace: answers.as_deref().and_then(TraceParent::parse),
    })
}

/// The reply the autopilot sent in `conversation_id` within `window` before now, if any:
/// an expert's reply after it is a correction (`autopilot_undone`).
pub async fn recent_autopilot_reply<'e>(
    db: impl PgExecutor<'e>,
    conversation_id: Uuid,
    window: Duration,
) -> Result<Option<Uuid>, StoreError> {
    let secs = window.as_secs_f64();
    Ok(sqlx::query_scalar(
        "SELECT id FROM messages
         WHERE conversation_id = $1 AND direction = 'outbound' AND author = 'agent'
           AND author_user_id IS NULL AND created_at > now() - make_interval(secs => $2)
         ORDER BY created_at DESC LIMIT 1",
    )
    .bind(conversation_id)
    .bind(secs)
    .fetch_optional(db)
    .await?)
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
