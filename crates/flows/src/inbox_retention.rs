//! Processed inbox events are kept for `INBOX_RETENTION_DAYS` (longer than any provider
//! retries a webhook, so the unique index still recognises every retry) and then deleted,
//! so `inbound_events` does not grow for ever. Once per slot across all pods (AA2, the
//! `cron_runs` claim the sweepers use), in chunks, so no statement holds many row locks or
//! runs long while webhooks are committed. Unprocessed and parked events are never pruned.

use chrono::Utc;
use serde_json::json;
use std::time::Duration;
use switchboard_domain::slot::slot_of;
use switchboard_store::{PgPool, StoreError, inbox, inbox_admin};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The `cron_runs.job` name.
pub const JOB: &str = "inbox-retention";

/// Rows deleted per statement.
const CHUNK: i64 = 5_000;

/// Most rows one slot deletes; a backlog (the first run on an old table) spreads over slots.
const MAX_PER_SLOT: u64 = 500_000;

/// Retention settings.
#[derive(Debug, Clone, Copy)]
pub struct RetentionConfig {
    /// Slot length: one prune per slot across all pods.
    pub interval: Duration,
    /// Processed events received longer ago than this are deleted.
    pub retention: Duration,
}

/// Prunes if this pod wins the current slot; returns how many events went.
pub async fn prune_once(
    db: &PgPool,
    config: RetentionConfig,
    pod_id: &str,
) -> Result<Option<u64>, StoreError> {
    let slot = slot_of(Utc::now(), config.interval);
    if !inbox::claim_slot(db, JOB, slot, pod_id).await? {
        return Ok(None);
    }
    let mut deleted = 0;
    let outcome = loop {
        match inbox_admin::prune_processed(db, config.retention, CHUNK).await {
            Ok(n) => {
                deleted += n;
                if n < CHUNK as u64 || deleted >= MAX_PER_SLOT {
                    break Ok(());
                }
            }
            Err(e) => break Err(e),
        }
    };
    if deleted > 0 {
        tracing::info!(
            deleted,
            "pruned processed inbox events past their retention"
        );
    }
    metrics::counter!("inbox_events_pruned_total").increment(deleted);
    inbox::finish_slot(db, JOB, slot, outcome.is_ok(), json!({"deleted": deleted})).await?;
    inbox::prune_slots(db, JOB, crate::sweeper::SLOT_HISTORY).await?;
    outcome.map(|()| Some(deleted))
}

/// Ticks every `interval` until `token` is cancelled.
pub fn spawn(
    db: PgPool,
    config: RetentionConfig,
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
            if let Err(e) = prune_once(&db, config, &pod_id).await {
                tracing::warn!(error = %e, "inbox retention failed");
            }
        }
    });
}
