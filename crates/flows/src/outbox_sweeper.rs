//! The outbox sweeper (SPEC §2): once per slot across all pods (AA2, a `cron_runs` row per
//! slot), it pushes `channel-outbound` again for outbox rows still unsent after a grace
//! period and held by no worker: their job was lost (Redis flushed, the pod died between
//! the release commit and the push) or their lease ran out. It also vacuums the queue's
//! finished jobs, and expires old Idempotency-Keys.

use crate::queue::OutboundQueue;
use crate::upkeep;
use chrono::Utc;
use serde_json::json;
use std::time::Duration;
use switchboard_domain::slot::slot_of;
use switchboard_store::{PgPool, StoreError, idempotency, inbox, outbox};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The `cron_runs.job` name.
pub const JOB: &str = "outbox-sweeper";

/// Sweeper settings.
#[derive(Debug, Clone, Copy)]
pub struct OutboxSweepConfig {
    /// Slot length: one sweep per slot across all pods.
    pub interval: Duration,
    /// Rows due less than this long ago are left to their job.
    pub grace: Duration,
    /// Most rows pushed per sweep.
    pub batch: i64,
    /// How long Idempotency-Keys are kept.
    pub idempotency_ttl: Duration,
}

/// Runs one slot's sweep if this pod wins the slot; returns how many rows it pushed.
pub async fn sweep_once(
    db: &PgPool,
    queue: &OutboundQueue,
    config: OutboxSweepConfig,
    pod_id: &str,
) -> Result<Option<usize>, StoreError> {
    let slot = slot_of(Utc::now(), config.interval);
    if !inbox::claim_slot(db, JOB, slot, pod_id).await? {
        return Ok(None);
    }
    if let Err(e) = upkeep::vacuum(&queue.queue_ref()).await {
        tracing::warn!(error = %e, "outbound queue vacuum failed");
    }
    let stale = outbox::stale_unsent(db, config.grace, config.batch).await?;
    let pushed = match queue.push_rows(&stale).await {
        Ok(()) => stale.len(),
        Err(e) => {
            tracing::warn!(count = stale.len(), error = %e, "outbox sweeper could not enqueue");
            0
        }
    };
    if pushed > 0 {
        tracing::info!(pushed, "outbox sweeper re-enqueued unsent replies");
    }
    metrics::counter!("outbox_sweeper_requeued_total").increment(pushed as u64);
    let expired = idempotency::expire(db, config.idempotency_ttl).await?;
    inbox::finish_slot(
        db,
        JOB,
        slot,
        pushed == stale.len(),
        json!({"stale": stale.len(), "pushed": pushed, "idempotency_keys_expired": expired}),
    )
    .await?;
    inbox::prune_slots(db, JOB, crate::sweeper::SLOT_HISTORY).await?;
    Ok(Some(pushed))
}

/// Ticks every `interval` until `token` is cancelled.
pub fn spawn(
    db: PgPool,
    queue: OutboundQueue,
    config: OutboxSweepConfig,
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
                tracing::warn!(error = %e, "outbox sweep failed");
            }
        }
    });
}
