//! The org's autopilot: its policy's changes, the judgement of each draft as it lands, and
//! the send of the drafts it admitted once their hold is over.
//!
//! - **Changes**: set by an admin, paused by any admin (the kill switch) or by the
//!   deployment (`AUTOPILOT=off`). Each is one transaction that locks the org's policy,
//!   stores the new one, ends the org's holds (they were admitted under the rules it
//!   replaced; their items wait for an expert) and writes the audit row with what it
//!   replaced, so two admins changing it at once leave an audit trail whose `before`s chain.
//! - **Judgement** ([`judge_draft`]): the facts the rules read (the org's local time, the
//!   breakers, the customer's history, the texts a link or number may come from) are
//!   gathered here and judged in `switchboard_domain::autopilot`; the draft statement then
//!   starts the hold only if the policy and the item are still what was judged.
//! - **The send** ([`AutopilotSend`], `autopilot-send`, once per slot across pods): each
//!   due item goes through the expert's release path (`crate::expert::autopilot_release`)
//!   at the version it was found at, in its own transaction with its outbox row, so it is
//!   sent once or, when anything changed it since, not at all.

use crate::Deps;
use async_trait::async_trait;
use chrono::{Datelike, Timelike, Utc};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use switchboard_domain::autopilot::{self, Facts, Invalid, Policy};
use switchboard_domain::faults::Step;
use switchboard_domain::{ChannelKind, Event, JobName, QueueStatus};
use switchboard_jobs::scheduler::{Job, JobError, Run};
use switchboard_store::audit::{self, Actor};
use switchboard_store::expert_queue::{self, DueHold, Moved};
use switchboard_store::{PgPool, StoreError, event_outbox, orgs};
use tracing::Instrument;
use uuid::Uuid;

pub use switchboard_store::drafts::Hold;

/// What the inbound job knows of a draft that just came back from the agent.
#[derive(Debug)]
pub struct DraftFacts<'a> {
    /// Owning org.
    pub org_id: Uuid,
    /// The channel the reply would leave on.
    pub channel: ChannelKind,
    /// The connection it would leave through (its breaker).
    pub connection_id: Uuid,
    /// The conversation.
    pub conversation_id: Uuid,
    /// The agent's confidence.
    pub confidence: Option<f32>,
    /// The draft is the stored fallback.
    pub fallback: bool,
    /// What the customer wrote last.
    pub customer_text: &'a str,
    /// The draft.
    pub draft: &'a str,
    /// The conversation's recent messages.
    pub conversation: &'a [String],
}

/// Judges a draft under its org's autopilot; the hold to start, if admitted. Anything that
/// cannot be read (Postgres, Redis, a time zone) leaves the draft for a human.
pub async fn judge_draft(deps: &Deps, d: &DraftFacts<'_>) -> Option<Hold> {
    match judge(deps, d).await {
        Ok(Ok(hold)) => Some(hold),
        Ok(Err(refusal)) => {
            metrics::counter!("autopilot_refusals_total", "rule" => refusal.as_str()).increment(1);
            None
        }
        Err(e) => {
            tracing::warn!(conversation_id = %d.conversation_id, error = %e,
                "could not judge the draft for the autopilot; it waits for an expert");
            None
        }
    }
}

async fn judge(
    deps: &Deps,
    d: &DraftFacts<'_>,
) -> Result<Result<Hold, autopilot::Refusal>, StoreError> {
    let Some(found) = orgs::autopilot_facts(&deps.db, d.conversation_id).await? else {
        return Ok(Err(autopilot::Refusal::Off));
    };
    let Some(stored) = found.policy else {
        return Ok(Err(autopilot::Refusal::Off));
    };
    let policy: Policy = serde_json::from_value(stored.clone())
        .map_err(|e| StoreError::Unexpected(format!("stored autopilot policy: {e}")))?;
    let zone: chrono_tz::Tz = found.time_zone.parse().unwrap_or(chrono_tz::UTC);
    let now = Utc::now().with_timezone(&zone);
    // A breaker state that cannot be read counts as open.
    let agent_breaker_open = deps.agent.breaker().is_open().await.unwrap_or(true);
    let outbound_breaker_open =
        crate::dispatch::breakers::breaker(deps, d.channel, d.connection_id)
            .is_open()
            .await
            .unwrap_or(true);
    let known: Vec<&str> = found
        .saved_replies
        .iter()
        .chain(d.conversation.iter())
        .map(String::as_str)
        .collect();
    let facts = Facts {
        channel: d.channel,
        confidence: d.confidence.map(f64::from),
        fallback: d.fallback,
        flagged: found.flagged,
        // Only an item waiting for an expert (or none yet) may be put on hold.
        taken: found
            .item_status
            .is_some_and(|s| !matches!(s, QueueStatus::Pending | QueueStatus::AwaitingClient)),
        first_conversation: found.first_conversation,
        customer_text: d.customer_text,
        draft: d.draft,
        known_texts: &known,
        local: (now.weekday(), now.hour() * 60 + now.minute()),
        agent_breaker_open,
        outbound_breaker_open,
    };
    Ok(autopilot::judge(&policy, &facts).map(|admitted| Hold {
        hold_secs: i32::try_from(admitted.hold_secs).unwrap_or(i32::MAX),
        rule: admitted.rule,
        policy: stored,
        seen_version: found.item_version,
    }))
}

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// No such org.
    #[error("no such org")]
    NotFound,
    /// A field out of bounds.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for PolicyError {
    fn from(e: sqlx::Error) -> Self {
        PolicyError::Store(StoreError::from(e))
    }
}

/// Replaces the org's policy with `policy` (validated); the stored policy.
pub async fn set(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    policy: Policy,
) -> Result<Policy, PolicyError> {
    policy.validate()?;
    change(deps, actor, org_id, "autopilot.updated", |_| policy).await
}

/// The kill switch: the policy off, its rules kept for when an admin turns it on again, and
/// every hold of the org stopped.
pub async fn pause(deps: &Deps, actor: Actor<'_>, org_id: Uuid) -> Result<Policy, PolicyError> {
    change(deps, actor, org_id, "autopilot.paused", Policy::paused).await
}

async fn change(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    action: &str,
    next: impl FnOnce(Policy) -> Policy,
) -> Result<Policy, PolicyError> {
    let mut tx = deps.db.begin().await?;
    let before = orgs::autopilot(&mut *tx, org_id, orgs::Lock::ForUpdate)
        .await?
        .ok_or(PolicyError::NotFound)?;
    let after = next(before.clone());
    orgs::set_autopilot(&mut *tx, org_id, &after).await?;
    let stopped = expert_queue::stop_holds(&mut tx, Some(org_id), None).await?;
    event_outbox::enqueue_many(&mut *tx, &moved_events(&stopped)).await?;
    audit::record(
        &mut *tx,
        actor,
        action,
        Some(("org", org_id)),
        json!({"before": before, "after": after, "holds_stopped": stopped.len()}),
    )
    .await?;
    tx.commit().await?;
    count_stopped(
        if action == "autopilot.paused" {
            "pause"
        } else {
            "policy"
        },
        &stopped,
    );
    if !stopped.is_empty() {
        deps.emitter.wake();
    }
    // The admin has looked at the rules again since an expert corrected the autopilot.
    deps.alerts
        .resolve(
            switchboard_domain::alerts::AlertKind::AutopilotUndone,
            &org_id.to_string(),
        )
        .await;
    Ok(after)
}

/// `AUTOPILOT=off` at start: every org's policy off (audited per org) and every hold
/// stopped, in one transaction; how many orgs were on.
pub async fn pause_everywhere(db: &PgPool) -> Result<usize, StoreError> {
    let mut tx = db.begin().await?;
    let paused = orgs::pause_every_autopilot(&mut *tx).await?;
    let stopped = expert_queue::stop_holds(&mut tx, None, None).await?;
    event_outbox::enqueue_many(&mut *tx, &moved_events(&stopped)).await?;
    tx.commit().await?;
    count_stopped("pause", &stopped);
    Ok(paused.len())
}

fn moved_events(moved: &[Moved]) -> Vec<(Uuid, Event)> {
    moved
        .iter()
        .map(|m| (m.org_id, Event::QueueItemUpdated(m.item.clone())))
        .collect()
}

fn count_stopped(by: &'static str, stopped: &[Moved]) {
    if !stopped.is_empty() {
        metrics::counter!("autopilot_holds_stopped_total", "by" => by)
            .increment(stopped.len() as u64);
    }
}

/// Most items one run of `autopilot-send` looks at; what is left waits for the next slot.
const SEND_BATCH: i64 = 500;

/// The period of `max_per_hour`.
const HOUR: Duration = Duration::from_secs(3600);

/// `autopilot-send`: releases the items whose hold is over.
pub struct AutopilotSend {
    /// The release path's dependencies.
    pub deps: Deps,
}

/// What became of one due hold.
enum Released {
    Sent,
    /// Changed since it was found: left alone.
    Changed,
    /// No longer sendable: stopped (1, or 0 when it had left its hold meanwhile).
    Stopped(usize),
}

/// What one run did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Released by the autopilot.
    pub sent: usize,
    /// Changed since they were found (an expert, the customer, another pod): left alone.
    pub changed: usize,
    /// Over the org's `max_per_hour`, or no longer sendable: stopped, for an expert.
    pub stopped: usize,
}

impl AutopilotSend {
    /// Sends every due hold once (see the module's doc).
    pub async fn send_due(&self) -> Result<Sent, JobError> {
        let deps = &self.deps;
        let mut out = Sent::default();
        let mut caps: HashMap<Uuid, Option<u32>> = HashMap::new();
        for due in expert_queue::due_holds(&deps.db, SEND_BATCH).await? {
            // The breakers were closed when the draft was judged; a hold outlives that, and
            // a reply the rules would not admit now is not sent (a state that cannot be read
            // counts as open, as in the judgement).
            if deps.agent.breaker().is_open().await.unwrap_or(true) {
                out.stopped += self.stop(due.org_id, due.id, "agent_breaker_open").await?;
                continue;
            }
            let outbound = crate::dispatch::breakers::breaker(deps, due.channel, due.connection_id);
            if outbound.is_open().await.unwrap_or(true) {
                out.stopped += self
                    .stop(due.org_id, due.id, "outbound_breaker_open")
                    .await?;
                continue;
            }
            let cap = match caps.get(&due.org_id) {
                Some(cap) => *cap,
                None => {
                    let policy =
                        orgs::autopilot(&deps.db, due.org_id, orgs::Lock::Unlocked).await?;
                    let cap = policy.and_then(|p| p.max_per_hour);
                    caps.insert(due.org_id, cap);
                    cap
                }
            };
            let key = deps.redis.key(&format!("autopilot:{}:hourly", due.org_id));
            if let Some(cap) = cap {
                let decision =
                    switchboard_coord::gcra::check(&deps.redis, &key, u64::from(cap), HOUR).await?;
                if !decision.allowed {
                    out.stopped += self.stop(due.org_id, due.id, "max_per_hour").await?;
                    continue;
                }
            }
            // The release is a trace of its own, as an expert's is (its outbox row carries
            // it to the dispatch, which links the customer message's trace).
            let span = tracing::info_span!("autopilot_release", action = "release",
                org_id = %due.org_id, queue_item_id = %due.id,
                rule = due.rule.as_deref().unwrap_or("autopilot"));
            match self.release(&due, cap, &key).instrument(span).await? {
                Released::Sent => out.sent += 1,
                Released::Changed => out.changed += 1,
                Released::Stopped(n) => out.stopped += n,
            }
        }
        Ok(out)
    }

    /// Releases one due hold in its own transaction with its outbox row.
    async fn release(
        &self,
        due: &DueHold,
        cap: Option<u32>,
        key: &str,
    ) -> Result<Released, JobError> {
        let deps = &self.deps;
        let mut tx = match deps.db.begin().await {
            Ok(tx) => tx,
            Err(e) => {
                self.refund(cap, key).await;
                return Err(StoreError::from(e).into());
            }
        };
        let released = crate::expert::autopilot_release(
            &mut tx,
            &deps.faults,
            &deps.pod,
            due.org_id,
            due.id,
            due.version,
            due.rule.as_deref().unwrap_or("autopilot"),
        )
        .await;
        use crate::expert::ActionError as E;
        match released {
            Ok(done) => {
                if let Err(e) = tx.commit().await {
                    // Whether a commit that failed took effect is unknown; the allowance
                    // is given back only when it surely did not (nothing was sent twice
                    // for it either way: the item is released at most once).
                    if !matches!(e, sqlx::Error::Io(_)) {
                        self.refund(cap, key).await;
                    }
                    return Err(StoreError::from(e).into());
                }
                deps.faults
                    .check(Step::AfterCommit)
                    .await
                    .map_err(|e| JobError::Other(Box::new(e)))?;
                crate::expert::after_commit(deps, &done).await;
                metrics::counter!("autopilot_sent_total").increment(1);
                Ok(Released::Sent)
            }
            Err(E::Conflict(_) | E::Precondition(_) | E::NotFound) => {
                drop(tx);
                self.refund(cap, key).await;
                Ok(Released::Changed)
            }
            Err(E::NoDraft(_) | E::StaleDraft(_)) => {
                drop(tx);
                self.refund(cap, key).await;
                Ok(Released::Stopped(
                    self.stop(due.org_id, due.id, "no_current_draft").await?,
                ))
            }
            Err(E::Store(e)) => {
                drop(tx);
                self.refund(cap, key).await;
                Err(e.into())
            }
            Err(e) => {
                drop(tx);
                self.refund(cap, key).await;
                Err(JobError::Other(Box::new(e)))
            }
        }
    }

    /// Ends one hold the autopilot cannot send, audited with why; 1 when it was still held.
    async fn stop(&self, org_id: Uuid, item_id: Uuid, why: &str) -> Result<usize, JobError> {
        let deps = &self.deps;
        let mut tx = deps.db.begin().await.map_err(StoreError::from)?;
        let stopped = expert_queue::stop_holds(&mut tx, Some(org_id), Some(item_id)).await?;
        if stopped.is_empty() {
            return Ok(0);
        }
        event_outbox::enqueue_many(&mut *tx, &moved_events(&stopped)).await?;
        audit::record(
            &mut *tx,
            Actor {
                org_id: Some(org_id),
                user_id: None,
                request_id: None,
            },
            "queue_item.stop",
            Some(("expert_queue", item_id)),
            json!({"by": "autopilot", "why": why}),
        )
        .await?;
        tx.commit().await.map_err(StoreError::from)?;
        count_stopped("autopilot", &stopped);
        deps.emitter.wake();
        Ok(stopped.len())
    }

    /// Gives back the hourly allowance a send that did not happen took.
    async fn refund(&self, cap: Option<u32>, key: &str) {
        let Some(cap) = cap else { return };
        if let Err(e) =
            switchboard_coord::gcra::refund(&self.deps.redis, key, u64::from(cap), HOUR, 1).await
        {
            tracing::warn!(error = %e, "could not give back the autopilot's hourly allowance");
        }
    }
}

#[async_trait]
impl Job for AutopilotSend {
    fn name(&self) -> JobName {
        JobName::AutopilotSend
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let Sent {
            sent,
            changed,
            stopped,
        } = self.send_due().await?;
        Ok(json!({"sent": sent, "changed": changed, "stopped": stopped}))
    }
}
