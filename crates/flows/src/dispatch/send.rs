//! One run of the `channel-outbound` job: claim the row, check the breaker, send the parts
//! not yet accepted, retry or reschedule, and record the outcome.
//!
//! ```text
//! claim: UPDATE outbox SET locked_until, lease_id WHERE id AND status IN (queued, retry)
//!        AND due AND lease free RETURNING ─► breaker (Redis, per channel + connection)
//!   open ─► deferred: due at the end of the cool-down, lease released, job pushed for then
//!           (no call, no attempt counted)
//!   closed, or this pod holds the one half-open probe ─►
//! split(text, max_chars) ─► each part not in outbox.parts: provider call (lease renewed
//!   every third of OUTBOX_LEASE_SECS) ─► accepted: its id appended to outbox.parts
//!   all accepted ─► one tx: outbox and message sent, dead letter resolved, event
//!   429/5xx/timeout ─► attempt n of 3: wait max(Retry-After, base·2^(n−1)·jitter)
//!     ≤ OUTBOUND_MAX_INLINE_WAIT_MS: one tx (retry + event), sleep holding the lease, again
//!     longer (or the breaker just opened): one tx (retry, lease released), job pushed
//!   3rd failure, or a refusal no retry fixes (most 4xx, Slack invalid_auth, Twilio 63016,
//!   Telegram 403) ─► one tx: outbox and message failed, channel_failures row queued, event
//! before any call: connection deleted, secrets no longer decrypt, payload malformed
//!   ─► one tx: outbox, message and channel_failures dead, event; one alert
//! ```

use super::lease::Lease;
use super::record::{self, Ending, Verdict};
use super::{DispatchError, MAX_ATTEMPTS, Outcome, breakers};
use crate::Deps;
use std::time::Duration;
use switchboard_channels::outbound::{PartOutcome, PartRequest, max_chars, split};
use switchboard_coord::breaker::Admission;
use switchboard_domain::ChannelKind;
use switchboard_domain::faults::DispatchPoint;
use switchboard_domain::jobs::OutboxPayload;
use switchboard_domain::trace::{self, TraceParent};
use switchboard_store::StoreError;
use switchboard_store::connections::{self, Secrets};
use switchboard_store::outbox::{self, Claimed, Unclaimed};
use tokio::time::Instant;
use tracing::Instrument;
use tracing::field::Empty;
use uuid::Uuid;

/// How often a job that finds its row not yet due waits for it before giving up; the job
/// that rescheduled the row pushed one for the due time.
const CLAIM_TRIES: usize = 5;

/// Runs the job for one outbox row.
pub async fn process(deps: &Deps, outbox_id: Uuid) -> Result<Outcome, DispatchError> {
    let Some((row, claimed_at)) = claim(deps, outbox_id).await? else {
        return Ok(match outbox::unclaimed(&deps.db, outbox_id).await? {
            Unclaimed::Missing => Outcome::Missing,
            Unclaimed::Finished => Outcome::Finished,
            Unclaimed::Held => Outcome::HeldElsewhere,
            Unclaimed::NotDue(_) => Outcome::NotDue,
        });
    };
    let span = tracing::Span::current();
    span.record("org_id", tracing::field::display(row.org_id));
    span.record("channel", row.channel.as_str());
    span.record("connection_id", tracing::field::display(row.connection_id));
    span.record("attempt", row.attempts + 1);
    // A run pushed by the sweeper carries no trace: the row's release is linked instead,
    // and the event's trace always is.
    let traced = |t: &Option<String>| t.as_deref().and_then(TraceParent::parse);
    trace::link(&span, traced(&row.traceparent).as_ref());
    trace::link(&span, traced(&row.answers_traceparent).as_ref());
    let lease = Lease::new(&row, deps.dispatch.settings().lease, claimed_at);
    let prepared = match prepare(deps, &row).await? {
        Ok(prepared) => prepared,
        Err(reason) => {
            // Before any provider call: no retry fixes this as things are, so the row is
            // dead at once with one alert, instead of going round the retries.
            let verdict = Verdict::Permanent {
                reason: reason.to_string(),
                status: None,
            };
            let attempts = (row.attempts, false);
            return record::failed(deps, &lease, &row, attempts, &verdict, Ending::Dead).await;
        }
    };
    let breaker = breakers::breaker(deps, row.channel, row.connection_id);
    let mut accepted: Vec<String> = serde_json::from_value(row.parts.clone()).unwrap_or_default();
    let mut attempts = row.attempts;
    loop {
        // A breaker Redis cannot answer is treated as closed: the send is the work.
        if let Ok(Admission::Open { retry_in }) = breaker.admit().await {
            return record::deferred(deps, &lease, &row, retry_in).await;
        }
        let sending = send_parts(deps, &lease, &row, &prepared, &mut accepted, attempts + 1);
        let verdict = match lease.hold(deps, sending).await? {
            Sent::All => {
                breakers::note(&breaker, true).await;
                return record::sent(deps, &lease, &row, &accepted, attempts + 1).await;
            }
            Sent::Stopped => return Ok(Outcome::LeaseLost),
            Sent::Failed(verdict) => verdict,
        };
        attempts += 1;
        let Verdict::Retry { after, .. } = &verdict else {
            // The provider answered: it is up, whatever it thought of this message.
            breakers::note(&breaker, true).await;
            let attempts = (attempts, true);
            return record::failed(deps, &lease, &row, attempts, &verdict, Ending::Retried).await;
        };
        let opened = breakers::note(&breaker, false).await;
        if attempts >= MAX_ATTEMPTS {
            let attempts = (attempts, true);
            return record::failed(deps, &lease, &row, attempts, &verdict, Ending::Retried).await;
        }
        let settings = deps.dispatch.settings();
        let mut wait = settings
            .retry
            .delay(attempts.unsigned_abs())
            .max(after.unwrap_or_default());
        if opened {
            wait = wait.max(settings.breaker.cooldown);
        }
        let inline = wait <= settings.max_inline_wait;
        if !record::retry(deps, &lease, &row, &verdict, (attempts, wait), !inline).await? {
            return Ok(Outcome::LeaseLost);
        }
        if !inline {
            super::push_after(deps, outbox_id, wait).await;
            return Ok(Outcome::Rescheduled { after: wait });
        }
        lease.hold(deps, tokio::time::sleep(wait)).await;
    }
}

/// Claims the row; a row due within the inline wait is waited for. With the row, when the
/// claim that took it was sent (its lease runs from about then).
async fn claim(deps: &Deps, outbox_id: Uuid) -> Result<Option<(Claimed, Instant)>, DispatchError> {
    let settings = deps.dispatch.settings();
    for _ in 0..CLAIM_TRIES {
        let sent_at = Instant::now();
        if let Some(row) = outbox::claim(&deps.db, outbox_id, settings.lease).await? {
            return Ok(Some((row, sent_at)));
        }
        match outbox::unclaimed(&deps.db, outbox_id).await? {
            Unclaimed::NotDue(wait) if wait <= settings.max_inline_wait => {
                tokio::time::sleep(wait + Duration::from_millis(5)).await;
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// What the sends need, read once per run.
struct Prepared {
    secrets: Secrets,
    payload: OutboxPayload,
    parts: Vec<String>,
}

/// Why a row can never be sent as it is: trying again changes nothing until an operator
/// acts, so the row is dead at once. The text is the dead letter's `error`.
#[derive(Debug, thiserror::Error)]
enum Unsendable {
    #[error("the outbox payload is malformed: {0}")]
    Malformed(#[source] serde_json::Error),
    #[error("the {0} connection this reply leaves through was deleted")]
    ConnectionGone(ChannelKind),
    #[error(
        "the {channel} connection's secrets cannot be read with the configured MASTER_ENCRYPTION_KEY or \
         MASTER_ENCRYPTION_KEYS ({why}); add the key back (after the first) or re-enter the connection's secrets, \
         then retry this dead letter"
    )]
    Undecryptable {
        channel: ChannelKind,
        why: &'static str,
    },
    #[error("the reply is empty")]
    Empty,
}

/// The connection's secrets, the payload and its parts, or why the row can never be sent.
/// Postgres failing is an error (the row is tried again); a secret that no longer decrypts
/// is [`Unsendable`], since trying again changes nothing until an operator restores the
/// key or the connection's secrets.
async fn prepare(
    deps: &Deps,
    row: &Claimed,
) -> Result<Result<Prepared, Unsendable>, DispatchError> {
    let payload: OutboxPayload = match serde_json::from_value(row.payload.clone()) {
        Ok(p) => p,
        Err(e) => return Ok(Err(Unsendable::Malformed(e))),
    };
    let found = connections::get_with_secrets(&deps.db, &deps.dispatch.cipher, row.connection_id);
    let secrets = match found.await {
        Ok(Some((_, secrets))) => secrets,
        Ok(None) => return Ok(Err(Unsendable::ConnectionGone(row.channel))),
        Err(StoreError::Crypto(why)) => {
            return Ok(Err(Unsendable::Undecryptable {
                channel: row.channel,
                why,
            }));
        }
        Err(e) => return Err(e.into()),
    };
    let parts = split(&payload.text, max_chars(row.channel).unwrap_or(usize::MAX));
    if parts.is_empty() {
        return Ok(Err(Unsendable::Empty));
    }
    Ok(Ok(Prepared {
        secrets,
        payload,
        parts,
    }))
}

/// How a run of [`send_parts`] ended.
enum Sent {
    /// Every part is accepted and recorded.
    All,
    /// The lease was taken over (or ran out): the rest of the reply is its next holder's.
    Stopped,
    /// A part failed; why.
    Failed(Verdict),
}

/// Sends the parts not accepted yet, in order, recording each accepted one before the next
/// goes out, and stops before any further part once the lease is lost: its new holder
/// sends what is not recorded, so going on would send the rest of the reply twice.
async fn send_parts(
    deps: &Deps,
    lease: &Lease,
    row: &Claimed,
    prepared: &Prepared,
    accepted: &mut Vec<String>,
    attempt: i32,
) -> Result<Sent, DispatchError> {
    let key = row.id.to_string();
    while accepted.len() < prepared.parts.len() {
        if !lease.held() {
            tracing::warn!(outbox_id = %row.id, sent = accepted.len(), parts = prepared.parts.len(),
                "outbox lease lost; the remaining parts are left to its holder");
            return Ok(Sent::Stopped);
        }
        let index = accepted.len();
        let request = PartRequest {
            channel: row.channel,
            secrets: prepared.secrets.expose(),
            reply_to: &prepared.payload.reply_to,
            customer_external_id: &prepared.payload.customer_external_id,
            text: &prepared.parts[index],
            idempotency_key: &key,
            part: index,
            parts: prepared.parts.len(),
        };
        let call = tracing::info_span!(
            "provider_call",
            otel.kind = "client",
            channel = row.channel.as_str(),
            part = index,
            parts = prepared.parts.len(),
            attempt,
            outcome = Empty,
            http.response.status_code = Empty,
            otel.status_code = Empty,
        );
        let outcome = deps
            .dispatch
            .providers
            .send_part(&request)
            .instrument(call.clone())
            .await;
        let (kind, status) = match &outcome {
            PartOutcome::Accepted { .. } => ("accepted", None),
            PartOutcome::Retry { status, .. } => ("retry", *status),
            PartOutcome::Permanent { status, .. } => ("permanent", *status),
        };
        call.record("outcome", kind);
        if let Some(status) = status {
            call.record("http.response.status_code", status);
        }
        if kind != "accepted" {
            call.record("otel.status_code", "ERROR");
        }
        metrics::counter!("outbound_calls_total", "channel" => row.channel.as_str(), "outcome" => kind)
            .increment(1);
        match outcome {
            PartOutcome::Accepted { provider_id } => {
                deps.faults
                    .dispatch_point(DispatchPoint::PartAccepted)
                    .await;
                let record = || async {
                    let recorded =
                        outbox::record_part(&deps.db, row.id, row.lease_id, index, &provider_id);
                    Ok(recorded.await?.then_some(()))
                };
                if lease.write(deps, "part", record).await?.is_none() {
                    tracing::warn!(outbox_id = %row.id, part = index, parts = prepared.parts.len(),
                        "outbox lease lost while sending parts; the remaining parts are left to its holder");
                    return Ok(Sent::Stopped);
                }
                accepted.push(provider_id);
            }
            PartOutcome::Retry {
                after,
                reason,
                status,
            } => {
                return Ok(Sent::Failed(Verdict::Retry {
                    after,
                    reason,
                    status,
                }));
            }
            PartOutcome::Permanent { reason, status } => {
                return Ok(Sent::Failed(Verdict::Permanent { reason, status }));
            }
        }
    }
    Ok(Sent::All)
}
