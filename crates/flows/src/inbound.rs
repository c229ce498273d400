//! The `channel-inbound` job (F2), idempotent end to end.

use crate::Deps;
use crate::agent::ChatLine;
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::{Postgres, Transaction};
use switchboard_store::StoreError;
use switchboard_store::inbox;
use uuid::Uuid;

/// Text stored when the agent cannot produce a draft; the item is flagged for review.
pub const FALLBACK_DRAFT: &str =
    "Thanks for your message. One of our team will get back to you shortly.";

/// How many entries `agent_context.history_summary` keeps.
pub const HISTORY_LEN: i64 = 10;

/// The message part of an inbox payload, as the webhook stored it.
#[derive(Debug, Deserialize)]
struct StoredMessage {
    customer_external_id: String,
    customer_name: Option<String>,
    text: String,
    channel_message_id: String,
    #[serde(default)]
    reply_to: Value,
}

/// What one run of the job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The event no longer exists.
    Missing,
    /// An earlier run finished it.
    AlreadyProcessed,
    /// Another worker holds its lease right now.
    HeldElsewhere,
    /// Nothing to draft (e.g. a bot message); marked processed.
    NoMessage,
    /// Processed now; `fallback` when the agent failed.
    Drafted {
        /// Whether the stored draft is the fallback text.
        fallback: bool,
    },
}

/// Errors of the job; all of them leave the event unprocessed for a later run.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored payload is not what the webhook writes.
    #[error("inbox payload is malformed: {0}")]
    Payload(String),
}

impl From<sqlx::Error> for JobError {
    fn from(e: sqlx::Error) -> Self {
        JobError::Store(StoreError::Sqlx(e))
    }
}

/// Runs the job for one inbox event.
pub async fn process(deps: &Deps, event_id: Uuid) -> Result<Outcome, JobError> {
    let result = run(deps, event_id).await;
    if let Err(e) = &result {
        if let Err(record) = inbox::record_failure(&deps.db, event_id, &e.to_string()).await {
            tracing::warn!(error = %record, "could not record inbound job failure");
        }
    }
    result
}

async fn run(deps: &Deps, event_id: Uuid) -> Result<Outcome, JobError> {
    let started = std::time::Instant::now();
    let Some(event) = inbox::claim(&deps.db, event_id, deps.inbox_lease).await? else {
        return Ok(match inbox::get(&deps.db, event_id).await? {
            None => Outcome::Missing,
            Some(e) if e.processed_at.is_some() => Outcome::AlreadyProcessed,
            Some(_) => Outcome::HeldElsewhere,
        });
    };
    let message = &event.payload["message"];
    if message.is_null() {
        mark_processed(&deps.db, event_id).await?;
        return Ok(Outcome::NoMessage);
    }
    let message: StoredMessage =
        serde_json::from_value(message.clone()).map_err(|e| JobError::Payload(e.to_string()))?;

    // 1. Customer, conversation, message: one transaction, every statement idempotent.
    let mut tx = deps.db.begin().await?;
    let customer_id: Uuid = sqlx::query_scalar(
        "INSERT INTO customers (org_id, channel, external_id, display_name) VALUES ($1, $2, $3, $4)
         ON CONFLICT (org_id, channel, external_id) DO UPDATE
           SET display_name = COALESCE(EXCLUDED.display_name, customers.display_name),
               updated_at = now()
         RETURNING id",
    )
    .bind(event.org_id)
    .bind(event.channel)
    .bind(&message.customer_external_id)
    .bind(&message.customer_name)
    .fetch_one(&mut *tx)
    .await?;
    let conversation_id: Uuid = sqlx::query_scalar(
        "INSERT INTO conversations (org_id, customer_id, channel, connection_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT (org_id, customer_id, channel) WHERE status = 'open'
           DO UPDATE SET updated_at = now()
         RETURNING id",
    )
    .bind(event.org_id)
    .bind(customer_id)
    .bind(event.channel)
    .bind(event.connection_id)
    .fetch_one(&mut *tx)
    .await?;
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                               channel_message_id, reply_to)
         VALUES ($1, $2, 'inbound', 'customer', $3, $4, $5, $6)
         ON CONFLICT (org_id, channel, channel_message_id) WHERE channel_message_id IS NOT NULL
           DO NOTHING
         RETURNING id",
    )
    .bind(event.org_id)
    .bind(conversation_id)
    .bind(&message.text)
    .bind(event.channel)
    .bind(&message.channel_message_id)
    .bind(&message.reply_to)
    .fetch_optional(&mut *tx)
    .await?;
    let message_id = match inserted {
        Some(id) => {
            append_history(
                &mut tx,
                conversation_id,
                json!({"role": "customer", "text": message.text, "message_id": id}),
            )
            .await?;
            // A client answering reopens their item: one atomic transition.
            sqlx::query(
                "UPDATE expert_queue SET status = 'pending', version = version + 1, updated_at = now()
                 WHERE conversation_id = $1 AND status = 'awaiting_client' RETURNING id",
            )
            .bind(conversation_id)
            .fetch_optional(&mut *tx)
            .await?;
            id
        }
        None => {
            sqlx::query_scalar(
                "SELECT id FROM messages WHERE org_id = $1 AND channel = $2 AND channel_message_id = $3",
            )
            .bind(event.org_id)
            .bind(event.channel)
            .bind(&message.channel_message_id)
            .fetch_one(&mut *tx)
            .await?
        }
    };
    tx.commit().await?;
    let stored_at = started.elapsed();
    if inserted.is_some() {
        deps.emitter.emit(
            event.org_id,
            "message_created",
            json!({"conversation_id": conversation_id, "message_id": message_id}),
        );
    }

    // 2. The draft, unless an earlier run stored it already (only possible when the message
    // was stored before this run). Storing the draft also marks the event processed.
    let existing: Option<bool> = match inserted {
        Some(_) => None,
        None => {
            sqlx::query_scalar("SELECT fallback FROM drafts WHERE message_id = $1")
                .bind(message_id)
                .fetch_optional(&deps.db)
                .await?
        }
    };
    let fallback = match existing {
        Some(fallback) => {
            mark_processed(&deps.db, event_id).await?;
            fallback
        }
        None => draft(deps, event_id, event.org_id, conversation_id, message_id).await?,
    };
    let drafted_at = started.elapsed();
    tracing::debug!(
        %event_id,
        stored_ms = stored_at.as_millis() as u64,
        drafted_ms = drafted_at.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "inbound event processed"
    );
    Ok(Outcome::Drafted { fallback })
}

/// Calls the agent and stores the draft with the queue item; returns whether it fell back.
async fn draft(
    deps: &Deps,
    event_id: Uuid,
    org_id: Uuid,
    conversation_id: Uuid,
    message_id: Uuid,
) -> Result<bool, JobError> {
    let history: Vec<(String, String)> = sqlx::query_as(
        "SELECT author::text, body FROM (
           SELECT author, body, created_at, id FROM messages WHERE conversation_id = $1
           ORDER BY created_at DESC, id DESC LIMIT 20) recent
         ORDER BY created_at, id",
    )
    .bind(conversation_id)
    .fetch_all(&deps.db)
    .await?;
    let lines: Vec<ChatLine> = history
        .into_iter()
        .map(|(role, text)| ChatLine { role, text })
        .collect();
    let (body, confidence, cost, fallback) = match deps
        .agent
        .draft(org_id, conversation_id, &lines)
        .await
    {
        Ok(d) => (d.reply, d.confidence, d.cost_usd, false),
        Err(e) => {
            tracing::warn!(%conversation_id, error = %e, "agent draft failed; storing fallback");
            (FALLBACK_DRAFT.to_owned(), None, None, true)
        }
    };

    let mut tx = deps.db.begin().await?;
    let draft_id: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO drafts (org_id, conversation_id, message_id, body, confidence, cost_usd, fallback)
         VALUES ($1, $2, $3, $4, $5, $6::float8::numeric, $7)
         ON CONFLICT (message_id) DO NOTHING RETURNING id",
    )
    .bind(org_id)
    .bind(conversation_id)
    .bind(message_id)
    .bind(&body)
    .bind(confidence)
    .bind(cost)
    .bind(fallback)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(draft_id) = draft_id else {
        // Another run stored it first; its result stands.
        mark_processed(&mut *tx, event_id).await?;
        tx.commit().await?;
        return Ok(fallback);
    };
    // Conversation before queue item: the same lock order as the first transaction.
    append_history(
        &mut tx,
        conversation_id,
        json!({"role": "agent_draft", "text": body, "draft_id": draft_id}),
    )
    .await?;
    let (item_id, version, created): (Uuid, i32, bool) = sqlx::query_as(
        "INSERT INTO expert_queue (org_id, conversation_id, status, draft_id, draft_body,
                                   draft_confidence, draft_cost_usd, flagged_for_review, sla_due_at)
         VALUES ($1, $2, 'pending', $3, $4, $5, $6::float8::numeric, $7, now() + interval '1 hour')
         ON CONFLICT (conversation_id) WHERE status <> 'resolved' DO UPDATE SET
           draft_id = EXCLUDED.draft_id,
           draft_body = EXCLUDED.draft_body,
           draft_confidence = EXCLUDED.draft_confidence,
           draft_cost_usd = EXCLUDED.draft_cost_usd,
           flagged_for_review = expert_queue.flagged_for_review OR EXCLUDED.flagged_for_review,
           version = expert_queue.version + 1,
           updated_at = now()
         RETURNING id, version, (xmax = 0)",
    )
    .bind(org_id)
    .bind(conversation_id)
    .bind(draft_id)
    .bind(&body)
    .bind(confidence)
    .bind(cost)
    .bind(fallback)
    .fetch_one(&mut *tx)
    .await?;
    mark_processed(&mut *tx, event_id).await?;
    tx.commit().await?;
    deps.emitter.emit(
        org_id,
        if created {
            "queue_item_created"
        } else {
            "queue_item_updated"
        },
        json!({"id": item_id, "conversation_id": conversation_id, "version": version,
               "flagged_for_review": fallback}),
    );
    Ok(fallback)
}

/// Appends one entry to `agent_context.history_summary`, keeping the last [`HISTORY_LEN`],
/// in a single statement: concurrent jobs serialise on the row lock and none is lost.
async fn append_history(
    tx: &mut Transaction<'_, Postgres>,
    conversation_id: Uuid,
    entry: Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE conversations SET updated_at = now(), agent_context = jsonb_set(
           agent_context, '{history_summary}',
           (SELECT COALESCE(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM (
              SELECT e, i FROM jsonb_array_elements(
                COALESCE(agent_context -> 'history_summary', '[]'::jsonb) || jsonb_build_array($2::jsonb)
              ) WITH ORDINALITY AS t(e, i)
              ORDER BY i DESC LIMIT $3) last_entries))
         WHERE id = $1",
    )
    .bind(conversation_id)
    .bind(entry)
    .bind(HISTORY_LEN)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn mark_processed<'e>(
    db: impl sqlx::PgExecutor<'e>,
    event_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE inbound_events SET processed_at = now(), attempts = attempts + 1, locked_until = NULL
         WHERE id = $1 AND processed_at IS NULL",
    )
    .bind(event_id)
    .execute(db)
    .await?;
    Ok(())
}
