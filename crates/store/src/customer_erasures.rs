//! The erasure of one customer (`customer_erasures`, `inbound_tombstones`): the request is a
//! row, and the erasure itself is one transaction that removes every row holding the
//! person's data and leaves numbers and hashes only.
//!
//! The row is the durable job (AA4): whoever holds its lease runs [`erase`], and a pod that
//! dies mid-way leaves it to the next one once the lease lapses. [`erase`] takes the row's
//! lock first and commits only while the row is still pending, so a second run, however
//! late, changes nothing and writes no second audit row (at-least-once runs, effects once).
//!
//! Lock order, after the erasure row: customer, conversations, outbox rows, inbox events,
//! as the `channel-inbound` job takes customer and conversation first.

use crate::StoreError;
use crate::audit::{self, Actor};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use std::time::Duration;
use switchboard_domain::Event;
use switchboard_domain::events::ConversationErased;
use switchboard_domain::faults::Faults;
use uuid::Uuid;

/// One erasure, as `POST /customers/{id}/erase` answers it.
#[allow(missing_docs)] // the columns
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ErasureRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub customer_id: Uuid,
    pub requested_by: Option<Uuid>,
    pub request_id: Option<String>,
    /// `pending` or `done`.
    pub status: String,
    pub attempts: i32,
    /// Rows removed per table, once done.
    pub counts: Option<sqlx::types::Json<Counts>>,
    pub requested_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, org_id, customer_id, requested_by, request_id, status, attempts, \
                       counts, requested_at, finished_at";

/// Rows removed per table: numbers only, for the audit row and the answer.
#[allow(missing_docs)] // one field per table
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Counts {
    pub customers: u64,
    pub conversations: u64,
    pub messages: u64,
    pub drafts: u64,
    pub expert_queue: u64,
    pub conversation_notes: u64,
    pub outbox: u64,
    pub channel_failures: u64,
    pub inbound_events: u64,
    /// Stored realtime events (the log and the relay's outbox) rewritten to
    /// `conversation_erased`.
    pub events_rewritten: u64,
    pub idempotency_keys: u64,
    /// Journey steps of their messages and inbox events (absent from erasures recorded
    /// before the journey existed).
    #[serde(default)]
    pub message_journey: u64,
}

/// Records the request, or returns the customer's existing erasure (AA5: one per customer,
/// whoever asks and on whichever pod). A new erasure is held for `lease` by its requester
/// (`true`), so it can run at once without racing the `customer-erasure` job.
pub async fn request(
    db: &mut PgConnection,
    org_id: Uuid,
    customer_id: Uuid,
    requested_by: Uuid,
    request_id: Option<&str>,
    lease: Duration,
) -> Result<(ErasureRow, bool), StoreError> {
    let inserted: Option<ErasureRow> = sqlx::query_as(&format!(
        "INSERT INTO customer_erasures (org_id, customer_id, requested_by, request_id, attempts,
                                        locked_until)
         VALUES ($1, $2, $3, $4, 1, now() + make_interval(secs => $5))
         ON CONFLICT (customer_id) DO NOTHING RETURNING {COLUMNS}"
    ))
    .bind(org_id)
    .bind(customer_id)
    .bind(requested_by)
    .bind(request_id)
    .bind(lease.as_secs_f64())
    .fetch_optional(&mut *db)
    .await?;
    match inserted {
        Some(row) => Ok((row, true)),
        None => by_customer(&mut *db, customer_id)
            .await?
            .map(|row| (row, false))
            .ok_or_else(|| StoreError::Unexpected("a customer erasure vanished".into())),
    }
}

/// The customer's erasure, if one was requested.
pub async fn by_customer<'e>(
    db: impl sqlx::PgExecutor<'e>,
    customer_id: Uuid,
) -> Result<Option<ErasureRow>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM customer_erasures WHERE customer_id = $1"
    ))
    .bind(customer_id)
    .fetch_optional(db)
    .await?)
}

/// The erasure's status (`pending`, `done`), if it exists.
pub async fn status(pool: &PgPool, id: Uuid) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT status FROM customer_erasures WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Takes the erasure for `lease` if it is pending and nobody holds it; counts the attempt.
pub async fn claim(pool: &PgPool, id: Uuid, lease: Duration) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "UPDATE customer_erasures
            SET attempts = attempts + 1, locked_until = now() + make_interval(secs => $2)
          WHERE id = $1 AND status = 'pending'
            AND (locked_until IS NULL OR locked_until < now())",
    )
    .bind(id)
    .bind(lease.as_secs_f64())
    .execute(pool)
    .await?
    .rows_affected()
        == 1)
}

/// Gives the lease back after an attempt that could not finish (it waits for a reply or an
/// inbound event in flight, or it failed), so the next slot takes it up at once.
pub async fn release(pool: &PgPool, id: Uuid) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE customer_erasures SET locked_until = NULL WHERE id = $1 AND status = 'pending'",
    )
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Pending erasures nobody holds, oldest first: what the `customer-erasure` job resumes.
pub async fn due(pool: &PgPool, limit: i64) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM customer_erasures
          WHERE status = 'pending' AND (locked_until IS NULL OR locked_until < now())
          ORDER BY requested_at LIMIT $1",
    )
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// One of the customer's inbox events, as the Redis dedup filter names it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InboxKey {
    /// Its channel.
    pub channel: String,
    /// Its connection.
    pub connection_id: Uuid,
    /// The provider's dedup key.
    pub dedup_key: String,
}

/// The condition on `inbound_events e` that picks the customer's events (`$1` org, `$2`
/// channel, `$3` external id): those whose message is theirs, and those that carry no
/// message (provider status callbacks of replies sent to them, edits) and name their id
/// anywhere in the payload. An id shorter than six characters is matched on the message
/// only, where a substring would match too much.
const CUSTOMER_EVENTS: &str = "e.org_id = $1 AND e.channel = $2::channel_kind
   AND (e.payload -> 'message' ->> 'customer_external_id' = $3
        OR (jsonb_typeof(e.payload -> 'message') IS DISTINCT FROM 'object'
            AND length($3) >= 6 AND strpos(lower(e.payload::text), lower($3)) > 0))";

/// The customer's inbox events as the dedup filter names them, read before the erasure so
/// their Redis keys can go first (see [`erase`] for why the order does not matter).
pub async fn inbox_keys(pool: &PgPool, erasure_id: Uuid) -> Result<Vec<InboxKey>, StoreError> {
    let customer: Option<(Uuid, String, String)> = sqlx::query_as(
        "SELECT c.org_id, c.channel::text, c.external_id
         FROM customer_erasures r JOIN customers c ON c.id = r.customer_id
         WHERE r.id = $1 AND r.status = 'pending'",
    )
    .bind(erasure_id)
    .fetch_optional(pool)
    .await?;
    let Some((org_id, channel, external_id)) = customer else {
        return Ok(Vec::new());
    };
    Ok(sqlx::query_as(&format!(
        "SELECT e.channel::text AS channel, e.connection_id, e.dedup_key
         FROM inbound_events e WHERE {CUSTOMER_EVENTS}"
    ))
    .bind(org_id)
    .bind(&channel)
    .bind(&external_id)
    .fetch_all(pool)
    .await?)
}

/// Why an erasure did not happen now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deferred {
    /// A reply to the customer is being sent, or has parts out and more to go: it is
    /// delivered whole before the erasure, never cut in half.
    ReplyInFlight,
    /// An inbox event of theirs is being processed; erasing under it would let the job
    /// store its message again.
    InboundInFlight,
}

/// What [`erase`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Erased {
    /// Committed: the rows removed per table, the inbox keys that went, and the events
    /// the consoles get.
    Done {
        /// Rows per table.
        counts: Counts,
        /// The inbox events removed (their Redis keys go too).
        inbox: Vec<InboxKey>,
    },
    /// Nothing changed; try again later.
    Deferred(Deferred),
    /// Finished before (another run, another pod): nothing changed.
    AlreadyDone,
}

/// Erases the customer of erasure `id` in one transaction: every row holding their data
/// goes, each inbox event leaves a tombstone (the SHA-256 of its dedup key) so a
/// provider's late retry is a duplicate, the realtime events stored for their
/// conversations become `conversation_erased` (ids only), stored answers naming their
/// conversations go, and the audit row says who erased which customer and how many rows
/// per table. Consoles get `conversation_erased` for each conversation.
///
/// Anything that can still write their data defers it: a reply being sent (or half sent)
/// and an inbox event being processed. A reply merely queued is deleted with the rest: its
/// job finds no row and sends nothing. A run on a row that is done already changes nothing.
pub async fn erase(pool: &PgPool, id: Uuid, faults: &Faults) -> Result<Erased, StoreError> {
    let mut tx = pool.begin().await?;
    let request: Option<(Uuid, Uuid, Option<Uuid>, Option<String>)> = sqlx::query_as(
        "SELECT org_id, customer_id, requested_by, request_id FROM customer_erasures
          WHERE id = $1 AND status = 'pending' FOR UPDATE",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((org_id, customer_id, requested_by, request_id)) = request else {
        return Ok(Erased::AlreadyDone);
    };
    let customer: Option<(String, String)> = sqlx::query_as(
        "SELECT channel::text, external_id FROM customers WHERE id = $1 AND org_id = $2 FOR UPDATE",
    )
    .bind(customer_id)
    .bind(org_id)
    .fetch_optional(&mut *tx)
    .await?;
    let mut counts = Counts::default();
    let mut inbox = Vec::new();
    let mut events = Vec::new();
    if let Some((channel, external_id)) = customer {
        let conversations: Vec<Uuid> = sqlx::query_scalar(
            "SELECT id FROM conversations WHERE customer_id = $1 ORDER BY id FOR UPDATE",
        )
        .bind(customer_id)
        .fetch_all(&mut *tx)
        .await?;
        let busy: Vec<bool> = sqlx::query_scalar(
            "SELECT COALESCE(locked_until > now(), false) OR parts <> '[]'::jsonb FROM outbox
              WHERE conversation_id = ANY($1) AND status IN ('queued', 'retry')
              ORDER BY id FOR UPDATE",
        )
        .bind(&conversations)
        .fetch_all(&mut *tx)
        .await?;
        if busy.into_iter().any(|b| b) {
            return Ok(Erased::Deferred(Deferred::ReplyInFlight));
        }
        let events_of: Vec<(Uuid, String, Uuid, String, bool)> = sqlx::query_as(&format!(
            "SELECT e.id, e.channel::text, e.connection_id, e.dedup_key,
                    e.processed_at IS NULL AND COALESCE(e.locked_until > now(), false)
             FROM inbound_events e WHERE {CUSTOMER_EVENTS} ORDER BY e.id FOR UPDATE"
        ))
        .bind(org_id)
        .bind(&channel)
        .bind(&external_id)
        .fetch_all(&mut *tx)
        .await?;
        if events_of.iter().any(|e| e.4) {
            return Ok(Erased::Deferred(Deferred::InboundInFlight));
        }
        let event_ids: Vec<Uuid> = events_of.iter().map(|e| e.0).collect();
        inbox = events_of
            .into_iter()
            .map(|(_, channel, connection_id, dedup_key, _)| InboxKey {
                channel,
                connection_id,
                dedup_key,
            })
            .collect();
        let items: Vec<(Uuid, Uuid, bool)> = sqlx::query_as(
            "SELECT id, conversation_id, status <> 'resolved' FROM expert_queue
              WHERE conversation_id = ANY($1)",
        )
        .bind(&conversations)
        .fetch_all(&mut *tx)
        .await?;
        let item_ids: Vec<Uuid> = items.iter().map(|i| i.0).collect();
        events = conversations
            .iter()
            .map(|&conversation_id| {
                Event::ConversationErased(ConversationErased {
                    conversation_id,
                    queue_item_id: items
                        .iter()
                        .find(|i| i.1 == conversation_id && i.2)
                        .map(|i| i.0),
                })
            })
            .collect();
        counts = delete_rows(
            &mut tx,
            org_id,
            customer_id,
            &conversations,
            &item_ids,
            &event_ids,
        )
        .await?;
    }
    let counts_json = serde_json::to_value(counts).map_err(StoreError::Payload)?;
    audit::record_with_events(
        &mut *tx,
        Actor {
            org_id: Some(org_id),
            user_id: requested_by,
            request_id: request_id.as_deref(),
        },
        "customer.erased",
        Some(("customer", customer_id)),
        serde_json::json!({"erasure_id": id, "counts": counts_json}),
        &events,
    )
    .await?;
    sqlx::query(
        "UPDATE customer_erasures SET status = 'done', counts = $2, finished_at = now(),
                locked_until = NULL
          WHERE id = $1",
    )
    .bind(id)
    .bind(&counts_json)
    .execute(&mut *tx)
    .await?;
    faults.erasure_point().await?;
    tx.commit().await?;
    Ok(Erased::Done { counts, inbox })
}

/// The deletes and rewrites of [`erase`], child tables first; returns the counts.
async fn delete_rows(
    tx: &mut PgConnection,
    org_id: Uuid,
    customer_id: Uuid,
    conversations: &[Uuid],
    items: &[Uuid],
    inbox_events: &[Uuid],
) -> Result<Counts, StoreError> {
    async fn run(tx: &mut PgConnection, sql: &str, ids: &[Uuid]) -> Result<u64, StoreError> {
        Ok(sqlx::query(sql)
            .bind(ids)
            .execute(&mut *tx)
            .await?
            .rows_affected())
    }
    sqlx::query(
        "INSERT INTO inbound_tombstones (connection_id, dedup_sha256)
         SELECT connection_id, sha256(convert_to(dedup_key, 'UTF8')) FROM inbound_events
          WHERE id = ANY($1)
         ON CONFLICT DO NOTHING",
    )
    .bind(inbox_events)
    .execute(&mut *tx)
    .await?;
    // The journey first: its steps are found through the messages and events going next.
    let journey = sqlx::query(
        "DELETE FROM message_journey
          WHERE message_id IN (SELECT id FROM messages WHERE conversation_id = ANY($1))
             OR inbound_event_id = ANY($2)",
    )
    .bind(conversations)
    .bind(inbox_events)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let mut c = Counts {
        message_journey: journey,
        inbound_events: run(
            tx,
            "DELETE FROM inbound_events WHERE id = ANY($1)",
            inbox_events,
        )
        .await?,
        channel_failures: run(
            tx,
            "DELETE FROM channel_failures WHERE outbox_id IN
               (SELECT id FROM outbox WHERE conversation_id = ANY($1))",
            conversations,
        )
        .await?,
        outbox: run(
            tx,
            "DELETE FROM outbox WHERE conversation_id = ANY($1)",
            conversations,
        )
        .await?,
        expert_queue: run(
            tx,
            "DELETE FROM expert_queue WHERE conversation_id = ANY($1)",
            conversations,
        )
        .await?,
        drafts: run(
            tx,
            "DELETE FROM drafts WHERE conversation_id = ANY($1)",
            conversations,
        )
        .await?,
        conversation_notes: run(
            tx,
            "DELETE FROM conversation_notes WHERE conversation_id = ANY($1)",
            conversations,
        )
        .await?,
        messages: run(
            tx,
            "DELETE FROM messages WHERE conversation_id = ANY($1)",
            conversations,
        )
        .await?,
        conversations: run(
            tx,
            "DELETE FROM conversations WHERE id = ANY($1)",
            conversations,
        )
        .await?,
        customers: run(
            tx,
            "DELETE FROM customers WHERE id = ANY($1)",
            &[customer_id],
        )
        .await?,
        ..Counts::default()
    };
    // Stored answers of console requests about their conversations (a release's message,
    // a note) name the conversation or its item.
    let named: Vec<Uuid> = conversations.iter().chain(items).copied().collect();
    c.idempotency_keys = sqlx::query(
        "DELETE FROM idempotency_keys k WHERE k.org_id = $1 AND k.response_body IS NOT NULL
            AND EXISTS (SELECT 1 FROM UNNEST($2::uuid[]) AS n(id)
                         WHERE strpos(k.response_body::text, n.id::text) > 0)",
    )
    .bind(org_id)
    .bind(&named)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    // The relay's outbox first: a relay moving those rows holds them until it commits, and
    // the log's rewrite (a statement of its own, so it sees that commit) then finds them.
    let named: Vec<String> = conversations.iter().map(Uuid::to_string).collect();
    for (table, dedup) in [
        ("event_outbox", ""),
        ("events", "dedup_key = 'conversation_erased:' || seq,"),
    ] {
        c.events_rewritten += sqlx::query(&format!(
            "UPDATE {table} SET event = 'conversation_erased', {dedup}
                    payload = jsonb_build_object('conversation_id', payload -> 'conversation_id',
                                                 'queue_item_id', NULL)
              WHERE org_id = $1 AND payload ->> 'conversation_id' = ANY($2::text[])
                AND event <> 'conversation_erased'"
        ))
        .bind(org_id)
        .bind(&named)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    }
    Ok(c)
}
