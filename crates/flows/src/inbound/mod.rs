//! The `channel-inbound` job (F2), delivered at least once per event (its push, the inbox
//! sweeper, an admin's replay) and idempotent end to end.
//!
//! A run is three round trips to Postgres, each shared with the pod's other jobs
//! (`batch.rs`), the statements and their lock order in `switchboard_store::messages` and
//! `switchboard_store::drafts` (the claim in `switchboard_store::inbox`):
//! 1. the claim: a lease on the event (`INBOX_LEASE_SECS`, renewed while the job works) and
//!    a fresh `claim_token`. Renewals and the failure record name the token, so a run that
//!    stalled past its lease can neither extend nor back off the claim of the run that took
//!    the event over; an event whose `retry_at` is ahead is not claimed, whoever pushed it;
//! 2. the message: customer, open conversation, message (unique per connection and provider
//!    message id), its history entry, an item brought back to pending, and their realtime
//!    events. An email from Resend first gets its body (`email_body.rs`), fetched holding
//!    the lease and no transaction;
//! 3. the draft, once the agent has answered (called outside any transaction, and not at
//!    all when the message already has a draft; a failure stores [`FALLBACK_DRAFT`],
//!    flagged for review): the draft, the queue item created or advanced, the event
//!    processed.
//!
//! A failed run records its error and its next attempt (`INBOX_RETRY_BASE_SECS`, doubling up
//! to `INBOX_RETRY_MAX_SECS`); after `INBOX_MAX_ATTEMPTS` the event is parked until an admin
//! replays it (`POST /inbound-events/{id}/replay`). A failure before the claim was no
//! attempt and records nothing.

mod batch;
mod email_body;
mod job;

pub use batch::{Batches, MAX_BATCH};
pub use email_body::EmailBodies;
pub use job::spawn_workers;
pub use switchboard_store::drafts::DraftRow;
pub use switchboard_store::messages::{MessageRow, StoredMessage};

use crate::Deps;
use serde_json::json;
use switchboard_channels::agent::ChatLine;
use switchboard_channels::email::received::FetchError;
use switchboard_domain::jobs::{InboxMessage, InboxPayload};
use switchboard_domain::trace;
use switchboard_domain::{Author, ChannelKind};
use switchboard_store::StoreError;
use switchboard_store::inbox;
use uuid::Uuid;

/// Text stored when the agent cannot produce a draft; the item is flagged for review.
pub const FALLBACK_DRAFT: &str =
    "Thanks for your message. One of our team will get back to you shortly.";

/// How many entries `agent_context.history_summary` keeps.
pub const HISTORY_LEN: i64 = 10;

/// How the job retries failures and bounds what it stores and sends.
#[derive(Debug, Clone, Copy)]
pub struct InboxPolicy {
    /// Attempts, backoff and parking.
    pub retry: inbox::RetryPolicy,
    /// Longest message text stored (`INBOUND_TEXT_MAX_BYTES`).
    pub text_max_bytes: usize,
    /// Most conversation text sent to the agent (`AGENT_PROMPT_MAX_BYTES`).
    pub prompt_max_bytes: usize,
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
    /// A failed attempt set a later retry time; the sweeper pushes it again then.
    Waiting,
    /// Nothing to draft (e.g. a bot message); marked processed.
    NoMessage,
    /// Processed now; `fallback` when the agent failed.
    Drafted {
        /// Whether the stored draft is the fallback text.
        fallback: bool,
    },
}

impl Outcome {
    /// The span attribute `outcome` of the job's run.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Missing => "missing",
            Outcome::AlreadyProcessed => "already_processed",
            Outcome::HeldElsewhere => "held_elsewhere",
            Outcome::Waiting => "waiting",
            Outcome::NoMessage => "no_message",
            Outcome::Drafted { fallback: false } => "drafted",
            Outcome::Drafted { fallback: true } => "fallback",
        }
    }
}

/// Errors of the job; all of them leave the event unprocessed for a later run.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored payload is not what the webhook writes.
    #[error("inbox payload is malformed: {0}")]
    Payload(#[from] serde_json::Error),
    /// The email's body could not be fetched from Resend yet.
    #[error("could not fetch the email body: {0}")]
    EmailBody(#[source] FetchError),
    /// The batch this event's statement ran in failed as a whole, because Postgres was
    /// away; shared by every event of that batch.
    #[error("storage failed for the whole batch: {0}")]
    Batch(#[source] std::sync::Arc<StoreError>),
    /// The pod's statement batching has stopped (the pod is going down).
    #[error("the inbound statement batching has stopped")]
    Stopped,
}

impl From<sqlx::Error> for JobError {
    fn from(e: sqlx::Error) -> Self {
        JobError::Store(StoreError::from(e))
    }
}

/// Runs the job for one inbox event.
pub async fn process(deps: &Deps, event_id: Uuid) -> Result<Outcome, JobError> {
    let mut claim = None;
    let result = run(deps, event_id, &mut claim).await;
    if let Err(e) = &result {
        // Only a failure under this job's own claim is counted: one that came before the
        // claim (Postgres away) was no attempt, and a lease taken over meanwhile belongs to
        // the job that took it, whose row this job must not back off or park.
        let Some(token) = claim else {
            tracing::debug!(%event_id, error = %e, "inbound job failed before its claim; nothing to record");
            return result;
        };
        let policy = deps.inbox_policy.retry;
        let recorded =
            inbox::record_failure(&deps.db, event_id, token, &e.to_string(), policy).await;
        if matches!(recorded, Ok(Some(_))) {
            switchboard_jobs::periodic::queue_alert::count_failure(&deps.redis).await;
        }
        match recorded {
            Ok(Some(failure)) if failure.parked => {
                metrics::counter!("inbox_events_parked_total").increment(1);
                tracing::error!(%event_id, attempts = failure.attempts, error = %e,
                    "inbound event parked after too many failed attempts; replay it once fixed");
            }
            Ok(Some(_)) => {}
            Ok(None) => tracing::warn!(%event_id, error = %e,
                "inbound job failed after its lease was taken over; the failure is not recorded"),
            Err(record) => tracing::warn!(error = %record, "could not record inbound job failure"),
        }
    }
    result
}

/// The job; `claim` is set to the claim's token once the event is held.
async fn run(deps: &Deps, event_id: Uuid, claim: &mut Option<Uuid>) -> Result<Outcome, JobError> {
    let started = std::time::Instant::now();
    // Database work gives way to the webhooks while the pod is busy; waiting for the agent
    // does not hold a turn (see `pressure`).
    let mut turn = deps.load.admit().await;
    // 1. The claim: a lease on the event, committed without waiting for the disk. A claim
    // lost to a Postgres crash leaves the event unclaimed, and it runs anew.
    let Some(event) = deps.inbound.claim(event_id).await? else {
        return Ok(match inbox::get(&deps.db, event_id).await? {
            None => Outcome::Missing,
            Some(e) if e.processed_at.is_some() => Outcome::AlreadyProcessed,
            Some(e) if e.retry_at.is_some_and(|at| at > chrono::Utc::now()) => Outcome::Waiting,
            Some(_) => Outcome::HeldElsewhere,
        });
    };
    let token = event.claim_token.ok_or_else(|| {
        StoreError::Unexpected("the inbox claim returned no claim token".to_owned())
    })?;
    *claim = Some(token);
    let span = tracing::Span::current();
    span.record("org_id", tracing::field::display(event.org_id));
    span.record("channel", event.channel.as_str());
    span.record(
        "connection_id",
        tracing::field::display(event.connection_id),
    );
    // A run the sweeper or a replay pushed carries no trace: the webhook's is linked.
    let webhook = event
        .traceparent
        .as_deref()
        .and_then(trace::TraceParent::parse);
    trace::link(&span, webhook.as_ref());
    let payload: InboxPayload = serde_json::from_value(event.payload.clone())?;
    let Some(mut message) = payload.message else {
        inbox::mark_processed(&deps.db, event_id).await?;
        return Ok(Outcome::NoMessage);
    };
    if let Some(email_id) = body_to_fetch(&event, &payload.raw, &message) {
        // Resend's webhook has no body. The claim holds the event while the body is
        // fetched, with no turn held meanwhile.
        drop(turn);
        let fetching = email_text(deps, event.connection_id, &email_id);
        message.text = holding_lease(deps, event_id, token, fetching).await?;
        message.text =
            switchboard_channels::cap_text(message.text, deps.inbox_policy.text_max_bytes);
        turn = deps.load.admit().await;
    }

    // 2. Customer, conversation, message, history, a reopened item and their events: one
    // statement (`messages::store_batch`, batched with other jobs' messages), committed without waiting for the disk. If Postgres
    // crashes before flushing it, the event is unprocessed and runs anew; whatever depends
    // on it is durable only after it: the draft statement commits synchronously later,
    // which flushes the log up to and including this commit.
    let message_id = Uuid::new_v4();
    let entry = json!({"role": "customer", "text": message.text, "message_id": message_id});
    let text = message.text.clone();
    let StoredMessage {
        conversation_id,
        message_id,
        inserted,
        drafted,
        authors,
        bodies,
        autopilot,
        hold_stopped,
    } = deps
        .inbound
        .store_message(MessageRow {
            org_id: event.org_id,
            channel: event.channel,
            connection_id: event.connection_id,
            message,
            message_id,
            entry,
            traceparent: trace::of(&span),
            event_id,
        })
        .await?;
    if hold_stopped {
        metrics::counter!("autopilot_holds_stopped_total", "by" => "customer").increment(1);
    }
    let mut history: Vec<(Author, String)> = authors.into_iter().zip(bodies).collect();
    if inserted {
        deps.emitter.wake();
        // The statement's own snapshot did not see the message it stored.
        history.push((Author::Customer, text));
        let excess = history.len().saturating_sub(RECENT_LEN);
        history.drain(..excess);
    } else if let Some(fallback) = drafted {
        // An earlier run stored the message and its draft.
        inbox::mark_processed(&deps.db, event_id).await?;
        return Ok(Outcome::Drafted { fallback });
    }
    let stored_at = started.elapsed();

    // 3. The draft, stored with the queue item and the event's completion in one statement.
    drop(turn);
    let drafting = draft(
        deps,
        Drafting {
            event_id,
            org_id: event.org_id,
            channel: event.channel,
            connection_id: event.connection_id,
            conversation_id,
            message_id,
            autopilot,
        },
        history,
    );
    let fallback = holding_lease(deps, event_id, token, drafting).await?;
    tracing::debug!(
        %event_id,
        stored_ms = stored_at.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "inbound event processed"
    );
    Ok(Outcome::Drafted { fallback })
}

/// How many of the conversation's latest messages the agent sees.
const RECENT_LEN: usize = 20;

/// The Resend email id whose body the message still needs, if any.
fn body_to_fetch(
    event: &inbox::InboundEvent,
    raw: &serde_json::Value,
    message: &InboxMessage,
) -> Option<String> {
    if event.channel != ChannelKind::Email || !message.text.trim().is_empty() {
        return None;
    }
    raw["data"]["email_id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The body of a received email. Resend being away is retried (the event stays
/// unprocessed); a refusal that no retry can fix stores the message with a note instead, so
/// the customer's email still reaches an expert.
async fn email_text(deps: &Deps, connection_id: Uuid, email_id: &str) -> Result<String, JobError> {
    match deps
        .email_bodies
        .fetch(&deps.db, connection_id, email_id)
        .await
    {
        Ok(text) => Ok(text),
        Err(JobError::EmailBody(FetchError::Refused(reason))) => {
            tracing::warn!(%email_id, %reason, "email body unavailable; storing the message without it");
            Ok(format!(
                "(The body of this email could not be retrieved: {reason}. Resend email id: {email_id}.)"
            ))
        }
        Err(e) => Err(e),
    }
}

/// Runs `work` (the agent call and what follows) while renewing the event's lease every
/// third of `INBOX_LEASE_SECS`: a slow agent keeps its event, and the event of a pod that
/// died is free for the sweeper within one lease. The renewal names the claim (`token`), so
/// a job that stalled past its lease and lost the event to another never extends the new
/// holder's lease; its work still finishes, and every step of it is idempotent.
async fn holding_lease<T>(
    deps: &Deps,
    event_id: Uuid,
    token: Uuid,
    work: impl Future<Output = T>,
) -> T {
    let renew = || async move {
        match inbox::renew(&deps.db, event_id, token, deps.inbox_lease).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(%event_id, "the inbox lease was taken over or the event is done")
            }
            Err(e) => tracing::warn!(%event_id, error = %e, "could not renew the inbox lease"),
        }
    };
    switchboard_domain::lease::hold(deps.inbox_lease, renew, work).await
}

/// The message a draft is made for.
struct Drafting {
    event_id: Uuid,
    org_id: Uuid,
    channel: ChannelKind,
    connection_id: Uuid,
    conversation_id: Uuid,
    message_id: Uuid,
    /// The org's autopilot was on as the message was stored.
    autopilot: bool,
}

/// Calls the agent with the recent messages, has the org's autopilot judge the draft when
/// it is on, and stores the draft with the queue item (batched with other jobs' drafts);
/// returns whether it fell back.
async fn draft(
    deps: &Deps,
    at: Drafting,
    history: Vec<(Author, String)>,
) -> Result<bool, JobError> {
    let Drafting {
        event_id,
        org_id,
        channel,
        connection_id,
        conversation_id,
        message_id,
        autopilot,
    } = at;
    // What the autopilot's rules read besides the draft: the customer's latest words and
    // the conversation's texts, which a link or number in the draft may come from.
    let (conversation, customer_text): (Vec<String>, String) = if autopilot {
        let latest = history
            .iter()
            .rev()
            .find(|(author, _)| *author == Author::Customer)
            .map(|(_, text)| text.clone())
            .unwrap_or_default();
        (history.iter().map(|(_, t)| t.clone()).collect(), latest)
    } else {
        (Vec::new(), String::new())
    };
    let lines = prompt_lines(history, deps.inbox_policy.prompt_max_bytes);
    let asked = std::time::Instant::now();
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
    let agent_ms = i64::try_from(asked.elapsed().as_millis()).unwrap_or(i64::MAX);

    let hold = if autopilot {
        crate::autopilot::judge_draft(
            deps,
            &crate::autopilot::DraftFacts {
                org_id,
                channel,
                connection_id,
                conversation_id,
                confidence,
                fallback,
                customer_text: &customer_text,
                draft: &body,
                conversation: &conversation,
            },
        )
        .await
    } else {
        None
    };

    let _turn = deps.load.admit().await;
    let draft_id = Uuid::new_v4();
    let entry = json!({"role": "agent_draft", "text": body, "draft_id": draft_id});
    let stored = deps
        .inbound
        .store_draft(DraftRow {
            event_id,
            draft_id,
            org_id,
            conversation_id,
            message_id,
            body,
            confidence,
            cost,
            fallback,
            entry,
            hold,
            agent_ms,
            trace_id: trace::current().map(|t| t.trace_id()),
        })
        .await?;
    // Not stored: another run stored this message's draft first; its result stands.
    if let Some(held) = stored {
        if held {
            metrics::counter!("autopilot_holds_started_total").increment(1);
        }
        deps.emitter.wake();
    }
    Ok(fallback)
}

/// The conversation for the agent, oldest first, within `max_bytes` of text: the newest
/// messages are kept (the newest one shortened if it alone is too long), older ones dropped.
fn prompt_lines(history: Vec<(Author, String)>, max_bytes: usize) -> Vec<ChatLine> {
    let mut left = max_bytes;
    let mut lines: Vec<ChatLine> = Vec::with_capacity(history.len());
    for (role, text) in history.into_iter().rev() {
        if left == 0 || (text.len() > left && !lines.is_empty()) {
            break;
        }
        let text = switchboard_channels::cap_text(text, left);
        left = left.saturating_sub(text.len());
        lines.push(ChatLine { role, text });
    }
    lines.reverse();
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_keeps_the_newest_messages_within_its_budget() {
        let history: Vec<(Author, String)> = (0..5)
            .map(|i| (Author::Customer, format!("{i}").repeat(400)))
            .collect();
        let lines = prompt_lines(history.clone(), 1024);
        let texts: Vec<&str> = lines.iter().map(|l| &l.text[..1]).collect();
        assert_eq!(texts, ["3", "4"], "oldest first, newest kept");
        let huge = vec![(Author::Customer, "x".repeat(10_000))];
        let lines = prompt_lines(huge, 1024);
        assert!(lines.len() == 1 && lines[0].text.len() <= 1024);
    }
}
