//! The durable inbox (`inbound_events`): what a webhook 2xx promises is stored here, claimed
//! and completed by the `channel-inbound` job; and what operators do with it: list and inspect
//! events, replay a parked one, count the waiting and parked ones for alerts and `/metrics`,
//! and prune processed events past their retention.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgPool, Postgres, QueryBuilder};
use std::borrow::Cow;
use std::time::Duration;
use switchboard_domain::ChannelKind;
use switchboard_domain::backoff::Backoff;
use switchboard_domain::trace::TraceParent;
use uuid::Uuid;

pub use switchboard_domain::InboundStatus as EventStatus;

/// An accepted webhook event.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboundEvent {
    /// Primary key; the job argument.
    pub id: Uuid,
    /// Owning org.
    pub org_id: Uuid,
    /// The connection it arrived on.
    pub connection_id: Uuid,
    /// Its channel.
    pub channel: ChannelKind,
    /// Provider dedup key.
    pub dedup_key: String,
    /// Normalised payload: `{"message": …|null, "raw": …}`.
    pub payload: Value,
    /// Set once the job has fully handled the event.
    pub processed_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A failed event is not claimed again before this time.
    pub retry_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The holder of the current (or last) claim: every later write of the job that claimed
    /// it names this token, so a job whose lease was taken over changes nothing.
    pub claim_token: Option<Uuid>,
    /// The webhook span's W3C trace context, when tracing was on: the job continues it.
    pub traceparent: Option<String>,
}

/// An event to add to the inbox.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// Owning org.
    pub org_id: Uuid,
    /// The connection it arrived on.
    pub connection_id: Uuid,
    /// Its channel.
    pub channel: ChannelKind,
    /// Provider dedup key, unique per connection.
    pub dedup_key: String,
    /// Normalised payload.
    pub payload: Value,
    /// Store it as already handled (nothing to process).
    pub processed: bool,
    /// The webhook span's trace context, stored for the job and the journey.
    pub traceparent: Option<TraceParent>,
    /// When the request reached the pod (its clock): the journey's `received`.
    pub arrived_at: DateTime<Utc>,
}

/// Inserts many events in one statement and one commit; for each input, the new id or
/// `None` when it is a duplicate (of a stored event, of an earlier input in the batch, or
/// of an event of an erased customer, whose tombstone keeps only the key's hash).
/// One commit for many webhooks is what makes the accept path cheap (group commit).
///
/// What Postgres refuses in any event (NUL characters, which neither `text` nor `jsonb`
/// can hold) is stripped first, so such an event is stored rather than failing its batch.
///
/// The same statement writes the journey's `received` (at the event's `arrived_at`) and
/// `committed` steps of each new event that carries a message, written by pod `pod`: they
/// exist exactly when the event does.
pub async fn insert_batch(
    pool: &PgPool,
    events: &[NewEvent],
    pod: &str,
) -> Result<Vec<Option<Uuid>>, StoreError> {
    let mut orgs = Vec::with_capacity(events.len());
    let mut conns = Vec::with_capacity(events.len());
    let mut channels = Vec::with_capacity(events.len());
    let mut done = Vec::with_capacity(events.len());
    let traces: Vec<Option<String>> = events
        .iter()
        .map(|e| e.traceparent.map(|t| t.to_string()))
        .collect();
    let keys: Vec<Cow<'_, str>> = events.iter().map(|e| strip_nul_str(&e.dedup_key)).collect();
    let cleaned: Vec<Option<Value>> = events
        .iter()
        .map(|e| has_nul(&e.payload).then(|| strip_nul(e.payload.clone())))
        .collect();
    let mut payloads = Vec::with_capacity(events.len());
    for (e, clean) in events.iter().zip(&cleaned) {
        orgs.push(e.org_id);
        conns.push(e.connection_id);
        channels.push(e.channel.as_str());
        payloads.push(clean.as_ref().unwrap_or(&e.payload));
        done.push(e.processed);
    }
    let key_refs: Vec<&str> = keys.iter().map(|k| k.as_ref()).collect();
    let arrived: Vec<DateTime<Utc>> = events.iter().map(|e| e.arrived_at).collect();
    let rows: Vec<(Uuid, Uuid, String)> = sqlx::query_as(&format!(
        "WITH input AS (
           SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::jsonb[],
                                $6::bool[], $7::text[], $8::timestamptz[])
             AS t(o, c, ch, k, p, d, tp, a)
         ), stored AS (
           INSERT INTO inbound_events (org_id, connection_id, channel, dedup_key, payload,
                                       processed_at, traceparent)
           SELECT o, c, ch::channel_kind, k, p, CASE WHEN d THEN now() END, tp
           FROM input t
           WHERE NOT EXISTS (SELECT 1 FROM inbound_tombstones tb
                             WHERE tb.connection_id = t.c
                               AND tb.dedup_sha256 = sha256(convert_to(t.k, 'UTF8')))
           ON CONFLICT (connection_id, dedup_key) DO NOTHING
           RETURNING id, org_id, connection_id, dedup_key, processed_at, traceparent
         ), journey AS (
           -- An event with nothing to process (a bot's message) becomes no message.
           INSERT INTO message_journey (org_id, inbound_event_id, step, at, pod, trace_id)
           SELECT e.org_id, e.id, s.step,
                  CASE s.step WHEN 'received'
                    THEN (SELECT min(t.a) FROM input t
                          WHERE t.c = e.connection_id AND t.k = e.dedup_key)
                    ELSE clock_timestamp() END,
                  $9, {trace}
           FROM stored e CROSS JOIN (VALUES ('received'), ('committed')) AS s(step)
           WHERE e.processed_at IS NULL
         )
         SELECT id, connection_id, dedup_key FROM stored",
        trace = crate::message_journey::trace_id_of("e.traceparent"),
    ))
    .bind(&orgs)
    .bind(&conns)
    .bind(&channels)
    .bind(&key_refs)
    .bind(&payloads)
    .bind(&done)
    .bind(&traces)
    .bind(&arrived)
    .bind(pod)
    .fetch_all(pool)
    .await?;
    let mut inserted: std::collections::HashMap<(Uuid, String), Uuid> = rows
        .into_iter()
        .map(|(id, conn, key)| ((conn, key), id))
        .collect();
    // The first input with a key gets its id; repeats within the batch are duplicates.
    Ok(events
        .iter()
        .zip(&keys)
        .map(|(e, key)| inserted.remove(&(e.connection_id, key.to_string())))
        .collect())
}

/// What [`insert_isolating`] says about one event.
pub type RowOutcome = Result<Option<Uuid>, StoreError>;

/// [`insert_batch`], except that one event Postgres still refuses never fails the others:
/// when the batch fails on a row's data, the batch is split in halves and each half retried,
/// down to the rows that fail alone. Failures of Postgres as a whole (unreachable,
/// restarting) fail the whole batch at once, as `Err`.
pub async fn insert_isolating(
    pool: &PgPool,
    events: &[NewEvent],
    pod: &str,
) -> Result<Vec<RowOutcome>, StoreError> {
    match insert_batch(pool, events, pod).await {
        Ok(ids) => Ok(ids.into_iter().map(Ok).collect()),
        Err(e) if !e.is_row_error() => Err(e),
        Err(e) if events.len() == 1 => Ok(vec![Err(e)]),
        Err(_) => {
            let (left, right) = events.split_at(events.len() / 2);
            let mut out = Box::pin(insert_isolating(pool, left, pod)).await?;
            out.extend(Box::pin(insert_isolating(pool, right, pod)).await?);
            Ok(out)
        }
    }
}

/// Whether any string (or key) in `value` holds a NUL character.
fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// `value` without NUL characters: Postgres' `jsonb` refuses `\u0000` and `text` refuses
/// the byte. The provider's payload loses nothing else, and the message text reads the same.
pub fn strip_nul(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(strip_nul_str(&s).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nul).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (strip_nul_str(&k).into_owned(), strip_nul(v)))
                .collect(),
        ),
        other => other,
    }
}

/// `s` without NUL characters.
pub fn strip_nul_str(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', ""))
    } else {
        Cow::Borrowed(s)
    }
}

/// Takes each event for `lease` if it is unprocessed, due (not waiting for the retry time a
/// failed attempt set) and nobody holds it (one atomic transition, one statement for all of
/// them), each with a fresh claim token; returns the events it took, in no particular order:
/// an event left out is processed, parked, waiting for its retry time, held by another
/// worker, or gone.
///
/// Each event taken gets its journey's `queued` step (by pod `pod`, in the webhook's trace)
/// in the same statement: one per attempt, as each claim is one.
pub async fn claim_many<'e>(
    db: impl sqlx::PgExecutor<'e>,
    ids: &[Uuid],
    lease: Duration,
    pod: &str,
) -> Result<Vec<InboundEvent>, StoreError> {
    Ok(sqlx::query_as(CLAIM.as_str())
        .bind(ids)
        .bind(lease.as_secs_f64())
        .bind(pod)
        .fetch_all(db)
        .await?)
}

/// The claim statement (`$1` event ids, `$2` lease seconds, `$3` the claiming pod, for the
/// journey's `queued`); public so tests can check its plan. It commits without waiting for the WAL flush: a claim lost to a crash only leaves
/// the event unclaimed, and what the job commits after it (synchronously, at the latest with
/// the draft) flushes the log up to and including the claim.
///
/// `retry_at` is checked here and not only by the sweeper: a job pushed for an event that is
/// backing off (a second push of one webhook, an orphaned job returned by the queue) must
/// not run it before its time, or a failing event would be retried as fast as jobs arrive.
pub static CLAIM: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{async_commit},
         claimed AS (
           UPDATE inbound_events SET locked_until = now() + make_interval(secs => $2),
                  claim_token = gen_random_uuid()
           FROM async_commit
           WHERE id = ANY($1::uuid[]) AND processed_at IS NULL AND parked_at IS NULL
             AND (locked_until IS NULL OR locked_until < now())
             AND (retry_at IS NULL OR retry_at <= now())
           RETURNING id, org_id, connection_id, channel, dedup_key, payload, processed_at,
                     retry_at, claim_token, traceparent, attempts
         ), journey AS (
           INSERT INTO message_journey (org_id, inbound_event_id, step, at, pod, detail, trace_id)
           SELECT org_id, id, 'queued', clock_timestamp(), $3,
                  jsonb_build_object('attempt', attempts + 1), {trace}
           FROM claimed
         )
         SELECT id, org_id, connection_id, channel, dedup_key, payload, processed_at, retry_at,
                claim_token, traceparent
         FROM claimed",
        async_commit = crate::async_commit!(),
        trace = crate::message_journey::trace_id_of("traceparent"),
    )
});

/// Extends the lease of an event that is still being processed by the claim `token` names;
/// `false` when that claim is no longer the event's (taken over after it lapsed, or the
/// event is done), and nothing was written.
pub async fn renew(
    pool: &PgPool,
    id: Uuid,
    token: Uuid,
    lease: Duration,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE inbound_events SET locked_until = now() + make_interval(secs => $3)
         WHERE id = $1 AND claim_token = $2 AND processed_at IS NULL",
    )
    .bind(id)
    .bind(token)
    .bind(lease.as_secs_f64())
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Loads an event.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<InboundEvent>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, org_id, connection_id, channel, dedup_key, payload, processed_at, retry_at,
                claim_token, traceparent
         FROM inbound_events WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// How failed events are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Failed attempts after which an event is parked (`INBOX_MAX_ATTEMPTS`).
    pub max_attempts: i32,
    /// Waits between attempts: from `INBOX_RETRY_BASE_SECS`, doubled for each later one, up
    /// to `INBOX_RETRY_MAX_SECS`.
    pub backoff: Backoff,
}

/// What [`record_failure`] did to the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// Failed attempts so far.
    pub attempts: i32,
    /// Whether this failure parked the event.
    pub parked: bool,
}

/// Counts a failed attempt of the claim `token` names, remembers the last error for
/// operators, gives the lease back and sets when the event may run again (backing off);
/// past `max_attempts` the event is parked instead: never claimed nor swept again until an
/// admin replays it. `None` (and nothing written) when the event is gone, already processed
/// or parked, or no longer held by that claim: a job whose lease was taken over must not
/// count its failure against the new holder, nor free or delay the event under it.
pub async fn record_failure(
    pool: &PgPool,
    id: Uuid,
    token: Uuid,
    error: &str,
    policy: RetryPolicy,
) -> Result<Option<Failure>, StoreError> {
    // SET expressions read the row as it was, so `attempts` is the count before this one.
    let row: Option<(i32, bool)> = sqlx::query_as(
        "UPDATE inbound_events SET attempts = attempts + 1, last_error = $2, locked_until = NULL,
                claim_token = NULL,
                retry_at = now() + make_interval(
                    secs => ($3::float8[])[LEAST(attempts, cardinality($3::float8[]) - 1) + 1]),
                parked_at = CASE WHEN attempts + 1 >= $4 THEN now() END
         WHERE id = $1 AND claim_token = $5 AND processed_at IS NULL AND parked_at IS NULL
         RETURNING attempts, parked_at IS NOT NULL",
    )
    .bind(id)
    .bind(strip_nul_str(error).as_ref())
    .bind(
        policy
            .backoff
            .seconds_table(policy.max_attempts.clamp(1, 31).unsigned_abs()),
    )
    .bind(policy.max_attempts.max(1))
    .bind(token)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(attempts, parked)| Failure { attempts, parked }))
}

/// Events still unprocessed after `grace` and due for a retry, oldest first: what the
/// sweeper re-enqueues. Parked events are left out (and out of the index it reads).
pub async fn stale_unprocessed(
    pool: &PgPool,
    grace: Duration,
    limit: i64,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM inbound_events
         WHERE processed_at IS NULL AND parked_at IS NULL
           AND received_at < now() - make_interval(secs => $1)
           AND (locked_until IS NULL OR locked_until < now())
           AND (retry_at IS NULL OR retry_at <= now())
         ORDER BY received_at LIMIT $2",
    )
    .bind(grace.as_secs_f64())
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Marks the inbox event `event_id` processed.
pub async fn mark_processed<'e>(
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

/// The condition selecting events in state `status`.
fn condition(status: EventStatus) -> &'static str {
    match status {
        EventStatus::Processed => "processed_at IS NOT NULL",
        EventStatus::Parked => "processed_at IS NULL AND parked_at IS NOT NULL",
        EventStatus::Processing => {
            "processed_at IS NULL AND parked_at IS NULL AND locked_until > now()"
        }
        EventStatus::Pending => {
            "processed_at IS NULL AND parked_at IS NULL AND (locked_until IS NULL OR locked_until <= now())"
        }
    }
}

const STATUS: &str = "CASE WHEN processed_at IS NOT NULL THEN 'processed'
     WHEN parked_at IS NOT NULL THEN 'parked'
     WHEN locked_until > now() THEN 'processing' ELSE 'pending' END";

const COLUMNS: &str = "id, org_id, connection_id, channel, dedup_key, attempts, last_error,
     received_at, retry_at, parked_at, processed_at";

/// One event as the admin list shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EventRow {
    /// Primary key.
    pub id: Uuid,
    /// Owning org.
    pub org_id: Uuid,
    /// The connection it arrived on.
    pub connection_id: Uuid,
    /// Its channel.
    pub channel: ChannelKind,
    /// The provider's dedup key.
    pub dedup_key: String,
    /// Where it stands.
    pub status: EventStatus,
    /// Failed attempts.
    pub attempts: i32,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// When the webhook was accepted.
    pub received_at: DateTime<Utc>,
    /// Not retried before this.
    pub retry_at: Option<DateTime<Utc>>,
    /// When it was parked.
    pub parked_at: Option<DateTime<Utc>>,
    /// When it was handled.
    pub processed_at: Option<DateTime<Utc>>,
}

/// One event with its payload and what it became.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EventDetail {
    /// The list columns.
    #[sqlx(flatten)]
    pub row: EventRow,
    /// `{"message": …|null, "raw": …}` as stored.
    pub payload: Value,
    /// The message the event became, once stored.
    pub message_id: Option<Uuid>,
    /// That message's conversation.
    pub conversation_id: Option<Uuid>,
}

/// Which events to list: newest first, keyset-paged on (received_at, id).
#[derive(Debug, Clone)]
pub struct EventFilter {
    /// The orgs to cover.
    pub orgs: Vec<Uuid>,
    /// Only events in this state.
    pub status: Option<EventStatus>,
    /// Only events of this channel.
    pub channel: Option<ChannelKind>,
    /// Continue after this key.
    pub before: Option<(DateTime<Utc>, Uuid)>,
    /// Rows to fetch.
    pub limit: i64,
}

/// The events `filter` selects.
pub async fn list(pool: &PgPool, filter: &EventFilter) -> Result<Vec<EventRow>, StoreError> {
    let mut q: QueryBuilder<'_, Postgres> = QueryBuilder::new(format!(
        "SELECT {COLUMNS}, {STATUS} AS status FROM inbound_events WHERE org_id = ANY("
    ));
    q.push_bind(&filter.orgs).push(")");
    if let Some(status) = filter.status {
        q.push(" AND ").push(condition(status));
    }
    if let Some(channel) = filter.channel {
        q.push(" AND channel = ").push_bind(channel);
    }
    if let Some((at, id)) = filter.before {
        q.push(" AND (received_at, id) < (")
            .push_bind(at)
            .push(", ")
            .push_bind(id)
            .push(")");
    }
    q.push(" ORDER BY received_at DESC, id DESC LIMIT ")
        .push_bind(filter.limit);
    Ok(q.build_query_as().fetch_all(pool).await?)
}

/// The org of event `id`, if it exists.
pub async fn org_of(pool: &PgPool, id: Uuid) -> Result<Option<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT org_id FROM inbound_events WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Event `id` with its payload and the message it became (found by the message's identity,
/// which the payload carries).
pub async fn detail(pool: &PgPool, id: Uuid) -> Result<Option<EventDetail>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {cols}, {STATUS} AS status, e.payload, m.id AS message_id,
                m.conversation_id
         FROM inbound_events e
         LEFT JOIN messages m ON m.org_id = e.org_id AND m.channel = e.channel
              AND m.channel_message_id = e.payload -> 'message' ->> 'channel_message_id'
         WHERE e.id = $1",
        cols = COLUMNS
            .split(',')
            .map(|c| format!("e.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", "),
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// What a replay found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Unparked (if it was) with a fresh attempt budget; enqueue its job.
    Ready,
    /// Already processed: running the job again would change nothing.
    AlreadyProcessed,
    /// No such event.
    Missing,
}

/// Makes event `id` runnable again: unparked, attempts reset, no backoff. The lease of a job
/// holding it right now is left alone.
pub async fn replay(pool: &PgPool, id: Uuid) -> Result<Replay, StoreError> {
    let found: Option<bool> = sqlx::query_scalar(
        "WITH reset AS (
           UPDATE inbound_events SET parked_at = NULL, attempts = 0, retry_at = NULL
           WHERE id = $1 AND processed_at IS NULL RETURNING id
         )
         SELECT EXISTS (SELECT 1 FROM reset) FROM inbound_events WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(match found {
        None => Replay::Missing,
        Some(true) => Replay::Ready,
        Some(false) => Replay::AlreadyProcessed,
    })
}

/// How many events are parked across all orgs.
pub async fn count_parked(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM inbound_events WHERE parked_at IS NOT NULL")
            .fetch_one(pool)
            .await?,
    )
}

/// Deletes up to `chunk` processed events received more than `retention` ago; returns how
/// many went. Unprocessed and parked events are never pruned.
pub async fn prune_processed(
    pool: &PgPool,
    retention: Duration,
    chunk: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM inbound_events WHERE id IN (
           SELECT id FROM inbound_events
           WHERE received_at < now() - make_interval(secs => $1) AND processed_at IS NOT NULL
           LIMIT $2)",
    )
    .bind(retention.as_secs_f64())
    .bind(chunk)
    .execute(pool)
    .await?
    .rows_affected())
}

/// Inbound events accepted and not yet processed (nor parked), counted up to `cap`: the
/// inbox backlog the queue alert compares with `ALERT_QUEUE_WAITING`, bounded so that a
/// large backlog costs no more to count than the threshold.
pub async fn waiting(pool: &PgPool, cap: i64) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM (
           SELECT 1 FROM inbound_events WHERE processed_at IS NULL AND parked_at IS NULL
           LIMIT $1) AS waiting",
    )
    .bind(cap)
    .fetch_one(pool)
    .await?)
}
