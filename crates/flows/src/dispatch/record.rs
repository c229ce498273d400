//! Recording what the provider said: one transaction per outcome on the outbox row, its
//! message and (on a final failure) its dead-letter row, with the `message_status_updated`
//! event stored in the same transaction, so the console's view cannot miss a change.
//!
//! Each outcome is a fenced write ([`Lease::write`]): tried again while the lease lasts if
//! Postgres fails it, and nothing at all if the lease was taken over.

use super::lease::Lease;
use super::{DispatchError, MAX_DEAD_LETTER_RETRIES, Outcome};
use crate::Deps;
use std::time::Duration;
use switchboard_domain::events::MessageStatusUpdated;
use switchboard_domain::trace;
use switchboard_domain::{DeliveryStatus, Event};
use switchboard_jobs::periodic::queue_alert;
use switchboard_store::event_outbox;
use switchboard_store::message_journey::{Attempt, Delivery, Stamp};
use switchboard_store::outbox::{self, Claimed, Failure};

/// Why a round stopped short of sending every part.
#[derive(Debug, Clone)]
pub(super) enum Verdict {
    /// Worth another attempt.
    Retry {
        after: Option<Duration>,
        reason: String,
        status: Option<u16>,
    },
    /// No attempt will succeed as things are.
    Permanent { reason: String, status: Option<u16> },
}

impl Verdict {
    fn reason(&self) -> &str {
        match self {
            Verdict::Retry { reason, .. } | Verdict::Permanent { reason, .. } => reason,
        }
    }

    fn status(&self) -> Option<u16> {
        match self {
            Verdict::Retry { status, .. } | Verdict::Permanent { status, .. } => *status,
        }
    }

    /// The journey's `attempt` of the call that ended so, numbered `number` in its round:
    /// the status, or a class of failure; never the provider's words, which can quote the
    /// customer's message.
    fn attempt(&self, number: i32) -> Attempt<'static> {
        let status = self.status();
        let (outcome, error_class) = match self {
            Verdict::Retry { .. } if status.is_some() => ("retry", None),
            Verdict::Retry { reason, .. } => ("retry", Some(transport_class(reason))),
            Verdict::Permanent { .. } if status.is_some() => ("refused", None),
            Verdict::Permanent { .. } => ("refused", Some("refused")),
        };
        Attempt {
            number,
            outcome,
            status,
            error_class,
        }
    }
}

/// A failed call without an HTTP status, by the words `outbound::http` starts its reason
/// with.
fn transport_class(reason: &str) -> &'static str {
    if reason.contains("timed out") {
        "timeout"
    } else if reason.contains("could not connect") {
        "connect"
    } else {
        "transport"
    }
}

/// What this pod writes into the journey with an outcome: the attempt, its id, its trace.
fn delivery<'a>(
    deps: &'a Deps,
    attempt: Option<Attempt<'a>>,
    trace: &'a Option<String>,
) -> Delivery<'a> {
    Delivery {
        attempt,
        stamp: Stamp {
            pod: &deps.pod,
            trace_id: trace.as_deref(),
        },
    }
}

/// The `message_status_updated` event of the reply of outbox row `row`.
fn event(row: &Claimed, status: DeliveryStatus, error: Option<&str>) -> Event {
    Event::MessageStatusUpdated(MessageStatusUpdated {
        conversation_id: row.conversation_id,
        message_id: row.message_id,
        delivery_status: status,
        error: error.map(str::to_owned),
        at: chrono::Utc::now(),
    })
}

/// Every part was accepted, the last one by attempt `attempt` of the round.
pub(super) async fn sent(
    deps: &Deps,
    lease: &Lease,
    row: &Claimed,
    accepted: &[String],
    attempt: i32,
) -> Result<Outcome, DispatchError> {
    let first = accepted.first().map_or("", String::as_str);
    let event = event(row, DeliveryStatus::Sent, None);
    let trace = trace::current().map(|t| t.trace_id());
    let call = Attempt {
        number: attempt,
        outcome: "accepted",
        status: None,
        error_class: None,
    };
    let mark = || async {
        let journey = delivery(deps, Some(call), &trace);
        let sent = outbox::mark_sent(&deps.db, row.id, row.lease_id, first, &event, journey);
        Ok(sent.await?.then_some(()))
    };
    if lease.write(deps, "sent", mark).await?.is_none() {
        tracing::warn!(outbox_id = %row.id, "sent, but the lease was taken over before the outcome was recorded");
        return Ok(Outcome::LeaseLost);
    }
    deps.emitter.wake();
    metrics::counter!("outbound_delivered_total", "channel" => row.channel.as_str()).increment(1);
    Ok(Outcome::Sent {
        parts: accepted.len(),
    })
}

/// Attempt `attempt` failed: the row and message say `retry`. With `release` the lease is
/// given back and the row is due again after `wait`. `false` when the lease was lost.
pub(super) async fn retry(
    deps: &Deps,
    lease: &Lease,
    row: &Claimed,
    verdict: &Verdict,
    (attempt, wait): (i32, Duration),
    release: bool,
) -> Result<bool, DispatchError> {
    let reason = verdict.reason();
    tracing::info!(outbox_id = %row.id, channel = %row.channel, wait_ms = wait.as_millis() as u64, %reason, "outbound attempt failed; retrying");
    let event = event(row, DeliveryStatus::Retry, Some(reason));
    let trace = trace::current().map(|t| t.trace_id());
    let call = verdict.attempt(attempt);
    let mark = || async {
        let marked = outbox::mark_retry(
            &deps.db,
            row.id,
            row.lease_id,
            reason,
            wait,
            release,
            &event,
            delivery(deps, Some(call), &trace),
        );
        Ok(marked.await?.then_some(()))
    };
    let recorded = lease.write(deps, "retry", mark).await?.is_some();
    if recorded {
        deps.emitter.wake();
    }
    Ok(recorded)
}

/// The breaker is open: no call, no attempt counted; the row is due again after `wait`.
pub(super) async fn deferred(
    deps: &Deps,
    lease: &Lease,
    row: &Claimed,
    wait: Duration,
) -> Result<Outcome, DispatchError> {
    let defer = || async {
        let deferred = outbox::defer(&deps.db, row.id, row.lease_id, wait);
        Ok(deferred.await?.then_some(()))
    };
    if lease.write(deps, "deferred", defer).await?.is_none() {
        return Ok(Outcome::LeaseLost);
    }
    metrics::counter!("outbound_deferred_total", "channel" => row.channel.as_str()).increment(1);
    tracing::debug!(outbox_id = %row.id, wait_ms = wait.as_millis() as u64, "breaker open; send deferred");
    super::push_after(deps, row.id, wait).await;
    Ok(Outcome::Deferred { after: wait })
}

/// How a round that failed for good is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// A dead letter the dead-letter worker retries (until the retries are used up).
    Retried,
    /// `dead` at once: the row failed before any provider call, for a reason no retry
    /// fixes as things are (a deleted connection, secrets that no longer decrypt). Its one
    /// alert tells an operator, who fixes the cause and retries it.
    Dead,
}

/// The round failed for good: dead-lettered (or `dead` once the dead-letter retries are
/// used up, or at once for an [`Ending::Dead`], which raises the alert). `called`: the
/// round's last attempt was a provider call (and `attempts` its number), not a refusal
/// before any call.
pub(super) async fn failed(
    deps: &Deps,
    lease: &Lease,
    row: &Claimed,
    (attempts, called): (i32, bool),
    verdict: &Verdict,
    ending: Ending,
) -> Result<Outcome, DispatchError> {
    let trace = trace::current().map(|t| t.trace_id());
    let call = called.then(|| verdict.attempt(attempts));
    let failure = Failure {
        error: verdict.reason(),
        provider_status: verdict.status(),
        attempts,
        max_retries: MAX_DEAD_LETTER_RETRIES,
        backoff: deps.dispatch.settings().dead_letter_backoff,
        dead: ending == Ending::Dead,
    };
    let mark = || async {
        let mut tx = deps.db.begin().await?;
        let journey = delivery(deps, call, &trace);
        let marked = outbox::mark_failed(&mut tx, row.id, row.lease_id, failure, journey);
        let Some(failed) = marked.await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        let events = [event(row, failed.status, Some(failure.error))];
        event_outbox::enqueue(&mut *tx, failed.org_id, &events).await?;
        tx.commit().await?;
        Ok(Some(failed))
    };
    let Some(failed) = lease.write(deps, "failed", mark).await? else {
        return Ok(Outcome::LeaseLost);
    };
    deps.emitter.wake();
    queue_alert::count_failure(&deps.redis).await;
    let dead = failed.status == DeliveryStatus::Dead;
    metrics::counter!("outbound_dead_letters_total", "channel" => row.channel.as_str(), "status" => if dead { "dead" } else { "queued" })
        .increment(1);
    tracing::warn!(outbox_id = %row.id, channel = %row.channel, attempts, dead, error = failure.error, "outbound delivery failed; dead-lettered");
    if dead {
        crate::periodic::dead_letters::raise_reply_dead(
            &deps.db,
            &deps.alerts,
            Some(failed.failure_id),
        )
        .await;
    }
    Ok(Outcome::Failed { dead })
}
