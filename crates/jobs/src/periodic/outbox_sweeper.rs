//! The outbox sweeper (SPEC §2): a scheduled job (once per slot across all pods, AA2) that
//! pushes `channel-outbound` again for outbox rows still unsent after a grace period and
//! held by no worker: their job was lost (Redis flushed, the pod died between the release
//! commit and the push) or their lease ran out.

use crate::queue::OutboundQueue;
use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::JobName;
use switchboard_store::{PgPool, outbox};

/// Sweeper settings.
#[derive(Debug, Clone, Copy)]
pub struct OutboxSweepConfig {
    /// Rows due less than this long ago are left to their job.
    pub grace: Duration,
    /// Most rows pushed per sweep.
    pub batch: i64,
}

/// Pushes the stale unsent rows again; returns what it did.
pub async fn sweep(
    db: &PgPool,
    queue: &OutboundQueue,
    config: OutboxSweepConfig,
) -> Result<Value, JobError> {
    let stale = outbox::stale_unsent(db, config.grace, config.batch).await?;
    if !stale.is_empty() {
        queue.push_rows(&stale).await?;
        tracing::info!(
            pushed = stale.len(),
            "outbox sweeper re-enqueued unsent replies"
        );
    }
    metrics::counter!("outbox_sweeper_requeued_total").increment(stale.len() as u64);
    Ok(json!({"stale": stale.len(), "pushed": stale.len()}))
}

/// The scheduled outbox sweep.
pub struct OutboxSweeper {
    /// Postgres.
    pub db: PgPool,
    /// The queue rows go back to.
    pub queue: OutboundQueue,
    /// Settings.
    pub config: OutboxSweepConfig,
}

#[async_trait]
impl Job for OutboxSweeper {
    fn name(&self) -> JobName {
        JobName::OutboxSweeper
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        sweep(&self.db, &self.queue, self.config).await
    }
}
