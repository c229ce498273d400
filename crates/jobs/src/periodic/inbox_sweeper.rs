//! The inbox sweeper (SPEC §2): a scheduled job (once per slot across all pods, AA2) that
//! re-enqueues events still unprocessed after a grace period, so an event whose job Redis
//! lost (crash, failover, flush) is still processed.
//!
//! Events that keep failing back off between attempts and are parked after
//! `INBOX_MAX_ATTEMPTS`: the sweeper skips both, so failing events can never fill its batch
//! and keep it from newer lost ones.

use crate::queue::InboundQueue;
use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::JobName;
use switchboard_store::{PgPool, inbox};

/// How long each slot's `cron_runs` record (which pod ran it, what it did) is kept by
/// default (`SCHEDULER_HISTORY_HOURS`).
pub const SLOT_HISTORY: Duration = Duration::from_secs(24 * 3600);

/// Events re-enqueued per bulk push.
const PUSH_CHUNK: usize = 100;

/// Sweeper settings.
#[derive(Debug, Clone, Copy)]
pub struct SweepConfig {
    /// Events younger than this are left to the queue.
    pub grace: Duration,
    /// Most events re-enqueued per sweep.
    pub batch: i64,
}

/// Re-enqueues the stale unprocessed events; returns what it did.
pub async fn sweep(
    db: &PgPool,
    queue: &InboundQueue,
    config: SweepConfig,
) -> Result<Value, JobError> {
    let stale = inbox::stale_unprocessed(db, config.grace, config.batch).await?;
    let mut pushed = 0;
    let mut failed = None;
    for chunk in stale.chunks(PUSH_CHUNK) {
        match queue.push_events(chunk).await {
            Ok(()) => pushed += chunk.len(),
            Err(e) => {
                tracing::warn!(count = chunk.len(), error = %e, "sweeper could not enqueue");
                failed = Some(e);
            }
        }
    }
    if pushed > 0 {
        tracing::info!(pushed, "inbox sweeper re-enqueued unprocessed events");
    }
    metrics::counter!("inbox_sweeper_requeued_total").increment(pushed as u64);
    // A failed push leaves the events unprocessed: the next slot tries again.
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok(json!({"stale": stale.len(), "pushed": pushed}))
}

/// The scheduled job.
pub struct InboxSweeper {
    /// Postgres.
    pub db: PgPool,
    /// The queue events go back to.
    pub queue: InboundQueue,
    /// Settings.
    pub config: SweepConfig,
}

#[async_trait]
impl Job for InboxSweeper {
    fn name(&self) -> JobName {
        JobName::InboxSweeper
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        sweep(&self.db, &self.queue, self.config).await
    }
}
