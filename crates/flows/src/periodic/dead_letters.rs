//! The dead-letter worker: a scheduled job (`dead-letters`, once per slot across all pods,
//! AA2) that hands due dead letters back to the `channel-outbound` job (each hand-back is one of
//! the `MAX_DEAD_LETTER_RETRIES` retries; the job records the result, and the
//! last failed retry makes the reply `dead` and raises its alert), and raises any alert a
//! pod died before raising.
//!
//! Also the admin's retry (`POST /dead-letters/{id}/retry`), which hands a row back at once.

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Value, json};
use sqlx::PgConnection;
use std::sync::Arc;
use switchboard_domain::events::MessageStatusUpdated;
use switchboard_domain::{DeliveryStatus, Event};
use switchboard_domain::{Emitter, JobName};
use switchboard_jobs::alerts::{Alert, AlertKind, Alerts};
use switchboard_jobs::queue::OutboundQueue;
use switchboard_jobs::scheduler::{Job, JobError, Run};
use switchboard_store::PgPool;
use switchboard_store::dead_letters::{self, Requeued};
use switchboard_store::{StoreError, event_outbox};
use uuid::Uuid;

/// Most rows handed back per slot.
const BATCH: i64 = 500;

/// What one slot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Rows handed back to the dispatch job.
    pub retried: usize,
    /// Alerts raised for rows a pod marked dead without alerting.
    pub alerted: usize,
}

fn retry_event(r: &Requeued) -> (Uuid, Event) {
    let event = Event::MessageStatusUpdated(MessageStatusUpdated {
        conversation_id: r.conversation_id,
        message_id: r.message_id,
        delivery_status: DeliveryStatus::Retry,
        error: None,
        at: Utc::now(),
    });
    (r.org_id, event)
}

/// What hands dead letters back: their rows, their queue and the realtime relay.
#[derive(Clone)]
pub struct DeadLetters {
    /// Postgres.
    pub db: PgPool,
    /// The queue rows go back to.
    pub outbound: OutboundQueue,
    /// Wakes the relay for the `message_status_updated` events.
    pub emitter: Arc<dyn Emitter>,
    /// Raises the alerts of rows a pod died before alerting.
    pub alerts: Alerts,
}

#[async_trait]
impl Job for DeadLetters {
    fn name(&self) -> JobName {
        JobName::DeadLetters
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let report = retry_due(self).await?;
        Ok(json!({"retried": report.retried, "alerted": report.alerted}))
    }
}

/// One pass: hands the due dead letters back to the dispatch job and raises the alerts a
/// pod died before raising. The body of the `dead-letters` scheduled job.
pub async fn retry_due(deps: &DeadLetters) -> Result<Report, StoreError> {
    let mut tx = deps.db.begin().await?;
    let requeued = dead_letters::requeue_due(&mut tx, BATCH).await?;
    let events: Vec<_> = requeued.iter().map(retry_event).collect();
    event_outbox::enqueue_many(&mut *tx, &events).await?;
    tx.commit().await?;
    if !requeued.is_empty() {
        deps.emitter.wake();
        tracing::info!(
            count = requeued.len(),
            "dead-letter worker retrying failed replies"
        );
        metrics::counter!("dead_letter_retries_total").increment(requeued.len() as u64);
        let ids: Vec<Uuid> = requeued.iter().map(|r| r.outbox_id).collect();
        push(deps, &ids).await;
    }
    Ok(Report {
        retried: requeued.len(),
        alerted: raise_reply_dead(&deps.db, &deps.alerts, None).await,
    })
}

async fn push(deps: &DeadLetters, ids: &[Uuid]) -> bool {
    match deps.outbound.push_rows(ids).await {
        Ok(()) => true,
        Err(e) => {
            // The rows are `retry` in Postgres: the outbox sweeper pushes them.
            tracing::warn!(count = ids.len(), error = %e, "could not push dead-letter retries");
            false
        }
    }
}

/// An admin's retry of dead letter `id` inside `tx` (with the caller's audit row): the row
/// goes back to the dispatch job now, without counting against the automatic retries.
/// `None` when it is not `queued` or `dead`. After the commit, call [`after_retry`].
pub async fn retry_now(tx: &mut PgConnection, id: Uuid) -> Result<Option<Requeued>, StoreError> {
    let Some(requeued) = dead_letters::retry_now(tx, id).await? else {
        return Ok(None);
    };
    let (org, event) = retry_event(&requeued);
    event_outbox::enqueue(&mut *tx, org, &[event]).await?;
    Ok(Some(requeued))
}

/// After an admin's retry committed: push the job (the sweeper covers a failed push) and
/// wake the realtime relay.
pub async fn after_retry(deps: &DeadLetters, requeued: &Requeued) {
    push(deps, &[requeued.outbox_id]).await;
    // An admin took it in hand: its `reply_dead` incident (if it was dead) is over; a retry
    // that dies again opens a new one.
    deps.alerts
        .resolve(AlertKind::ReplyDead, &requeued.failure_id.to_string())
        .await;
    deps.emitter.wake();
}

/// Raises the alert of dead rows nobody alerted yet (`only` one, or any): claiming a row's
/// alert is one atomic statement, so each dead row alerts exactly once across all pods.
/// The provider's refusal (customer data: it may name the recipient) stays in the log
/// line's `error` field, which the Sentry scrubbing removes by name; sinks get the figures.
pub async fn raise_reply_dead(db: &PgPool, alerts: &Alerts, only: Option<Uuid>) -> usize {
    let dead = match dead_letters::claim_alerts(db, only, 100).await {
        Ok(dead) => dead,
        Err(e) => {
            tracing::warn!(error = %e, "could not claim dead-letter alerts");
            return 0;
        }
    };
    for d in &dead {
        metrics::counter!("dead_letter_alerts_total", "channel" => d.channel.as_str()).increment(1);
        tracing::warn!(
            failure_id = %d.id,
            outbox_id = %d.outbox_id,
            org_id = %d.org_id,
            channel = %d.channel,
            error = %d.error,
            "outbound reply is dead"
        );
        let scope = d.id.to_string();
        let message = format!(
            "a {} reply is dead after {} attempts and {} dead-letter retries (provider status {})",
            d.channel,
            d.attempts,
            d.retries,
            d.provider_status
                .map_or_else(|| "none".to_owned(), |s| s.to_string())
        );
        alerts
            .raise_alert(Alert {
                kind: AlertKind::ReplyDead,
                scope: &scope,
                org_id: Some(d.org_id),
                message: &message,
                details: json!({
                    "failure_id": d.id,
                    "outbox_id": d.outbox_id,
                    "org_id": d.org_id,
                    "channel": d.channel,
                    "provider_status": d.provider_status,
                    "attempts": d.attempts,
                    "retries": d.retries,
                }),
            })
            .await;
    }
    dead.len()
}
