//! The inbox sweeper (SPEC §2): once per slot across all pods (AA2, a `cron_runs` row per
//! slot), it re-enqueues events still unprocessed after a grace period, so an event whose
//! job Redis lost (crash, failover, flush) is still processed.
//!
//! Events that keep failing back off between attempts and are parked after
//! `INBOX_MAX_ATTEMPTS`: the sweeper skips both, so failing events can never fill its batch
//! and keep it from newer lost ones.

use crate::queue::InboundQueue;
use crate::upkeep;
use chrono::Utc;
use serde_json::json;
use std::time::Duration;
use switchboard_domain::slot::slot_of;
use switchboard_store::{PgPool, inbox, inbox_admin};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The `cron_runs.job` name.
pub const JOB: &str = "inbox-sweeper";

/// How long each slot's `cron_runs` record (which pod ran it, what it did) is kept.
pub const SLOT_HISTORY: Duration = Duration::from_secs(24 * 3600);

/// Events re-enqueued per bulk push.
const PUSH_CHUNK: usize = 100;

/// Sweeper settings.
#[derive(Debug, Clone, Copy)]
pub struct SweepConfig {
    /// Slot length: one sweep per slot across all pods.
    pub interval: Duration,
    /// Events younger than this are left to the queue.
    pub grace: Duration,
    /// Most events re-enqueued per sweep.
    pub batch: i64,
}

/// Runs one slot's sweep if this pod wins the slot; returns how many events it re-enqueued.
pub async fn sweep_once(
    db: &PgPool,
    queue: &InboundQueue,
    config: SweepConfig,
    pod_id: &str,
) -> Result<Option<usize>, switchboard_store::StoreError> {
    let slot = slot_of(Utc::now(), config.interval);
    if !inbox::claim_slot(db, JOB, slot, pod_id).await? {
        return Ok(None);
    }
    let vacuumed = match upkeep::vacuum(&queue.queue_ref()).await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "queue vacuum failed");
            0
        }
    };
    if let Err(e) = upkeep::forget_gone_workers(&queue.queue_ref()).await {
        tracing::warn!(error = %e, "could not clean up gone workers");
    }
    let stale = inbox::stale_unprocessed(db, config.grace, config.batch).await?;
    let mut pushed = 0;
    let mut failed = 0;
    for chunk in stale.chunks(PUSH_CHUNK) {
        match queue.push_events(chunk).await {
            Ok(()) => pushed += chunk.len(),
            Err(e) => {
                failed += chunk.len();
                tracing::warn!(count = chunk.len(), error = %e, "sweeper could not enqueue");
            }
        }
    }
    if pushed > 0 {
        tracing::info!(pushed, "inbox sweeper re-enqueued unprocessed events");
    }
    metrics::counter!("inbox_sweeper_requeued_total").increment(pushed as u64);
    inbox::finish_slot(
        db,
        JOB,
        slot,
        failed == 0,
        json!({"stale": stale.len(), "pushed": pushed, "failed": failed, "vacuumed": vacuumed}),
    )
    .await?;
    inbox::prune_slots(db, JOB, SLOT_HISTORY).await?;
    Ok(Some(pushed))
}

/// Ticks every `interval` until `token` is cancelled.
pub fn spawn(
    db: PgPool,
    queue: InboundQueue,
    config: SweepConfig,
    pod_id: String,
    token: CancellationToken,
    tracker: &TaskTracker,
) {
    tracker.spawn(async move {
        let mut tick = tokio::time::interval(config.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = token.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = sweep_once(&db, &queue, config, &pod_id).await {
                tracing::warn!(error = %e, "inbox sweep failed");
            }
            // Every pod reports the same figure (alert on its max): parked events wait for
            // an operator.
            match inbox_admin::count_parked(&db).await {
                Ok(n) => metrics::gauge!("inbox_events_parked").set(n as f64),
                Err(e) => tracing::debug!(error = %e, "could not count parked events"),
            }
        }
    });
}
