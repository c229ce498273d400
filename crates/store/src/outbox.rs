//! The outbox (`outbox`) from start to end: the expert's message and its row, written in the
//! release transaction (SPEC §2); the `channel-outbound` job's claim with a lease, each
//! accepted part recorded, then the outcome on the outbox row and its message together; and
//! the rows the outbox sweeper hands to `channel-outbound` again.
//!
//! Every write after the claim names the claim's `lease_id`: a worker whose lease lapsed
//! (a stalled pod) and was taken over records nothing, so the new holder's record stands.
//! Each such write says whether it matched (the lease still ours) apart from whether it
//! failed (an error: Postgres away), because the job answers the two differently: a lost
//! lease stops it at once, a failed write is tried again while the lease lasts. So that a
//! write can be tried again after an error that hid whether it committed, the part record
//! also matches when it finds its own part already there.
//! Lock order, as everywhere the outbox is written: outbox row, then its message, then its
//! dead-letter row.

use crate::StoreError;
use crate::message_journey::{Delivery, outbox_steps};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor, PgPool};
use std::time::Duration;
use switchboard_domain::backoff::Backoff;
use switchboard_domain::trace::TraceParent;
use switchboard_domain::{Author, ChannelKind, DeliveryStatus, Event};
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

/// A claimed outbox row.
#[allow(missing_docs)] // the columns returned by the claim
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Claimed {
    pub id: Uuid,
    pub org_id: Uuid,
    pub conversation_id: Uuid,
    pub message_id: Uuid,
    pub connection_id: Uuid,
    pub channel: ChannelKind,
    /// `switchboard_domain::jobs::OutboxPayload`.
    pub payload: Value,
    /// Provider ids of the parts already accepted, in order.
    pub parts: Value,
    /// Failed attempts in the current delivery round.
    pub attempts: i32,
    /// Names this claim in every later write.
    pub lease_id: Uuid,
    /// The release span's trace context (the dispatch continues it).
    pub traceparent: Option<String>,
    /// The trace context of the message the reply answers (the dispatch links to it).
    pub answers_traceparent: Option<String>,
}

/// The claim statement (`$1` outbox id, `$2` lease seconds): one atomic transition, so two
/// workers never hold the same row (AA5).
pub const CLAIM: &str = "UPDATE outbox
   SET locked_until = now() + make_interval(secs => $2), lease_id = gen_random_uuid(), updated_at = now()
 WHERE id = $1 AND status IN ('queued', 'retry') AND next_attempt_at <= now()
   AND (locked_until IS NULL OR locked_until < now())
 RETURNING id, org_id, conversation_id, message_id, connection_id, channel, payload, parts,
           attempts, lease_id, traceparent, answers_traceparent";

/// Takes the row for `lease` if it is due and nobody holds it.
pub async fn claim(
    pool: &PgPool,
    id: Uuid,
    lease: Duration,
) -> Result<Option<Claimed>, StoreError> {
    Ok(sqlx::query_as(CLAIM)
        .bind(id)
        .bind(lease.as_secs_f64())
        .fetch_optional(pool)
        .await?)
}

/// Why a claim found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unclaimed {
    /// No such row.
    Missing,
    /// Nothing left to send (`sent`), or waiting for the dead-letter worker (`failed`,
    /// `dead`).
    Finished,
    /// Another worker holds it.
    Held,
    /// Due in this long.
    NotDue(Duration),
}

/// Reads why [`claim`] returned nothing (the answer may be stale by the time it arrives).
pub async fn unclaimed(pool: &PgPool, id: Uuid) -> Result<Unclaimed, StoreError> {
    let row: Option<(String, bool, f64)> = sqlx::query_as(
        "SELECT status, COALESCE(locked_until > now(), false),
                GREATEST(EXTRACT(EPOCH FROM next_attempt_at - now()), 0)::float8
         FROM outbox WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(match row {
        None => Unclaimed::Missing,
        Some((status, _, _)) if !matches!(status.as_str(), "queued" | "retry") => {
            Unclaimed::Finished
        }
        Some((_, true, _)) => Unclaimed::Held,
        Some((_, false, secs)) => Unclaimed::NotDue(Duration::from_secs_f64(secs)),
    })
}

/// Extends the lease; `false` when the claim is no longer ours.
pub async fn renew(
    pool: &PgPool,
    id: Uuid,
    lease_id: Uuid,
    lease: Duration,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE outbox SET locked_until = now() + make_interval(secs => $3)
         WHERE id = $1 AND lease_id = $2",
    )
    .bind(id)
    .bind(lease_id)
    .bind(lease.as_secs_f64())
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Appends part `index`'s provider id, before the next part goes out. Idempotent: appends
/// only while exactly `index` parts are recorded, and also matches (writing nothing new)
/// when part `index` is already this provider id, so a retry after an error that hid the
/// first try's commit is not mistaken for a lost lease. `false` when the claim is lost.
pub async fn record_part(
    pool: &PgPool,
    id: Uuid,
    lease_id: Uuid,
    index: usize,
    provider_id: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE outbox SET updated_at = now(),
                parts = CASE WHEN jsonb_array_length(parts) = $4
                             THEN parts || jsonb_build_array($3::text) ELSE parts END
         WHERE id = $1 AND lease_id = $2
           AND (jsonb_array_length(parts) = $4 OR parts ->> $4 = $3)",
    )
    .bind(id)
    .bind(lease_id)
    .bind(provider_id)
    .bind(i32::try_from(index).unwrap_or(i32::MAX))
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Every part went out: the row and its message are `sent` with the (first part's)
/// provider id and the time, a dead-letter row, if any, is resolved, and `event` (the
/// console's `message_status_updated`) is stored for the relay: one statement, so one
/// commit. The journey's last `attempt` and `delivered` are written with it. `false` (and
/// nothing written) when the lease was lost.
pub async fn mark_sent<'e>(
    db: impl PgExecutor<'e>,
    id: Uuid,
    lease_id: Uuid,
    provider_id: &str,
    event: &Event,
    journey: Delivery<'_>,
) -> Result<bool, StoreError> {
    let (name, payload) = crate::event_outbox::row(event)?;
    let sent: Option<i32> = sqlx::query_scalar(&format!(
        "WITH o AS (
           UPDATE outbox SET status = 'sent', provider_id = $3, sent_at = now(), last_error = NULL,
                  locked_until = NULL, lease_id = NULL, updated_at = now()
           WHERE id = $1 AND lease_id = $2
           RETURNING id, org_id, conversation_id, message_id, parts
         ), {journey}, m AS (
           UPDATE messages SET delivery_status = 'sent', provider_message_id = $3,
                  delivered_at = now(), delivery_error = NULL
           FROM o WHERE messages.id = o.message_id RETURNING messages.id
         ), f AS (
           UPDATE channel_failures SET status = 'resolved', updated_at = now()
           FROM o WHERE channel_failures.outbox_id = o.id AND channel_failures.status <> 'resolved'
           RETURNING channel_failures.id
         ), e AS (
           INSERT INTO event_outbox (org_id, event, payload) SELECT o.org_id, $4, $5 FROM o
         )
         SELECT 1 FROM o",
        journey = outbox_steps(
            "$6",
            "'delivered'",
            "jsonb_build_object('parts', jsonb_array_length(o.parts))",
            "$7",
            "$8"
        ),
    ))
    .bind(id)
    .bind(lease_id)
    .bind(provider_id)
    .bind(name)
    .bind(payload)
    .bind(journey.attempt.map(|a| a.detail()))
    .bind(journey.stamp.pod)
    .bind(journey.stamp.trace_id)
    .fetch_optional(db)
    .await?;
    Ok(sent.is_some())
}

/// A failed attempt that will be retried: counted, the error kept, the row and its
/// message `retry`, and `event` stored for the relay, in one statement. With `release` the
/// lease is given back and the row is due again in `after` (the job is rescheduled);
/// without it the worker keeps the row and retries itself. The journey's `attempt` is
/// written with it. `false` (and nothing written) when the lease was lost.
#[allow(clippy::too_many_arguments)] // one statement's inputs
pub async fn mark_retry<'e>(
    db: impl PgExecutor<'e>,
    id: Uuid,
    lease_id: Uuid,
    error: &str,
    after: Duration,
    release: bool,
    event: &Event,
    journey: Delivery<'_>,
) -> Result<bool, StoreError> {
    let (name, payload) = crate::event_outbox::row(event)?;
    let recorded: Option<i32> = sqlx::query_scalar(&format!(
        "WITH o AS (
           UPDATE outbox SET status = 'retry', attempts = attempts + 1, last_error = $3,
                  next_attempt_at = now() + make_interval(secs => $4),
                  locked_until = CASE WHEN $5 THEN NULL ELSE locked_until END,
                  lease_id = CASE WHEN $5 THEN NULL ELSE lease_id END, updated_at = now()
           WHERE id = $1 AND lease_id = $2
           RETURNING org_id, conversation_id, message_id
         ), {journey}, m AS (
           UPDATE messages SET delivery_status = 'retry', delivery_error = $3
           FROM o WHERE messages.id = o.message_id RETURNING messages.id
         ), e AS (
           INSERT INTO event_outbox (org_id, event, payload) SELECT o.org_id, $6, $7 FROM o
         )
         SELECT 1 FROM o",
        journey = outbox_steps("$8", "NULL", "NULL", "$9", "$10"),
    ))
    .bind(id)
    .bind(lease_id)
    .bind(error)
    .bind(after.as_secs_f64())
    .bind(release)
    .bind(name)
    .bind(payload)
    .bind(journey.attempt.map(|a| a.detail()))
    .bind(journey.stamp.pod)
    .bind(journey.stamp.trace_id)
    .fetch_optional(db)
    .await?;
    Ok(recorded.is_some())
}

/// The breaker is open: the row waits `after` without an attempt being counted, and the
/// lease is given back. `false` when the claim is lost.
pub async fn defer(
    pool: &PgPool,
    id: Uuid,
    lease_id: Uuid,
    after: Duration,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE outbox SET status = 'retry', next_attempt_at = now() + make_interval(secs => $3),
                locked_until = NULL, lease_id = NULL, updated_at = now()
         WHERE id = $1 AND lease_id = $2",
    )
    .bind(id)
    .bind(lease_id)
    .bind(after.as_secs_f64())
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The final failure of a delivery round.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    /// Why, without secrets.
    pub error: &'a str,
    /// The provider's HTTP status, when there was an answer.
    pub provider_status: Option<u16>,
    /// Failed attempts in this round.
    pub attempts: i32,
    /// Dead-letter retries after which the row is `dead`.
    pub max_retries: i32,
    /// Waits between dead-letter retries: the first one's, then each later one's by the
    /// retries the row has had.
    pub backoff: Backoff,
    /// No retry can fix it as things are (the row failed before any provider call: its
    /// connection deleted, its secrets no longer decrypting): `dead` at once, with no
    /// dead-letter retries, and an admin retries it once the cause is fixed.
    pub dead: bool,
}

/// What [`mark_failed`] recorded.
#[allow(missing_docs)]
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Failed {
    pub org_id: Uuid,
    pub conversation_id: Uuid,
    pub message_id: Uuid,
    /// `failed` (a dead-letter retry will follow) or `dead`.
    pub status: DeliveryStatus,
    /// The `channel_failures` row.
    pub failure_id: Uuid,
}

/// The round failed for good: the row and its message become `failed` and the dead-letter
/// row is written (`queued` for the dead-letter worker) — or, when the dead-letter retries
/// are used up or the failure is [`Failure::dead`], all three become `dead`. The journey's
/// last `attempt` (none when the round failed before any call) and `dead_lettered` are
/// written with them.
pub async fn mark_failed(
    tx: &mut PgConnection,
    id: Uuid,
    lease_id: Uuid,
    failure: Failure<'_>,
    journey: Delivery<'_>,
) -> Result<Option<Failed>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "WITH o AS (
           UPDATE outbox SET
             status = CASE WHEN $8 OR EXISTS (SELECT 1 FROM channel_failures f
                                              WHERE f.outbox_id = $1 AND f.retries >= $6)
                           THEN 'dead' ELSE 'failed' END,
             attempts = $5, last_error = $3, locked_until = NULL, lease_id = NULL, updated_at = now()
           WHERE id = $1 AND lease_id = $2
           RETURNING id, org_id, conversation_id, message_id, channel, status
         ), {journey}, f AS (
           INSERT INTO channel_failures (outbox_id, org_id, channel, error, provider_status,
                                         attempts, status, next_attempt_at)
           SELECT o.id, o.org_id, o.channel, $3, $4, $5,
                  CASE o.status WHEN 'dead' THEN 'dead' ELSE 'queued' END,
                  now() + make_interval(secs => ($7::float8[])[1])
           FROM o
           ON CONFLICT (outbox_id) DO UPDATE SET
             error = EXCLUDED.error, provider_status = EXCLUDED.provider_status,
             attempts = channel_failures.attempts + EXCLUDED.attempts, status = EXCLUDED.status,
             next_attempt_at = now() + make_interval(secs => ($7::float8[])[
               LEAST(channel_failures.retries, cardinality($7::float8[]) - 1) + 1]),
             updated_at = now()
           RETURNING id
         ), m AS (
           UPDATE messages SET delivery_status = o.status, delivery_error = $3
           FROM o WHERE messages.id = o.message_id RETURNING messages.id
         )
         SELECT o.org_id, o.conversation_id, o.message_id, o.status, f.id AS failure_id
         FROM o CROSS JOIN f",
        journey = outbox_steps(
            "$9",
            "'dead_lettered'",
            "jsonb_build_object('dead', o.status = 'dead', 'attempts', $5::int4)",
            "$10",
            "$11"
        ),
    ))
    .bind(id)
    .bind(lease_id)
    .bind(failure.error)
    .bind(failure.provider_status.map(i32::from))
    .bind(failure.attempts)
    .bind(failure.max_retries)
    .bind(failure.backoff.seconds_table(21))
    .bind(failure.dead)
    .bind(journey.attempt.map(|a| a.detail()))
    .bind(journey.stamp.pod)
    .bind(journey.stamp.trace_id)
    .fetch_optional(&mut *tx)
    .await?)
}
