//! Event retention: once per slot across all pods (AA2, a `cron_runs` row per slot), events
//! older than `EVENTS_RETENTION_HOURS` are deleted.

use crate::events;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::time::Duration;
use switchboard_domain::slot::slot_of;
use switchboard_store::{PgPool, StoreError, inbox};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The `cron_runs.job` name.
pub const JOB: &str = "events-retention";
/// One cleanup per slot of this length.
pub const SLOT: Duration = Duration::from_secs(15 * 60);
/// How often each pod tries to claim the current slot.
const TICK: Duration = Duration::from_secs(60);

/// Runs `slot`'s cleanup if this pod wins the slot; returns how many events it deleted, or
/// `None` when another pod has the slot.
pub async fn run_once(
    db: &PgPool,
    slot: DateTime<Utc>,
    retention: Duration,
    pod_id: &str,
) -> Result<Option<u64>, StoreError> {
    if !inbox::claim_slot(db, JOB, slot, pod_id).await? {
        return Ok(None);
    }
    let cutoff = Utc::now()
        - chrono::Duration::from_std(retention).unwrap_or_else(|_| chrono::Duration::days(365));
    let outcome = events::delete_before(db, cutoff).await;
    let (ok, detail) = match &outcome {
        Ok(n) => (true, json!({"deleted": n, "cutoff": cutoff})),
        Err(e) => (false, json!({"error": e.to_string()})),
    };
    inbox::finish_slot(db, JOB, slot, ok, detail).await?;
    let deleted = outcome?;
    metrics::counter!("realtime_events_expired_total").increment(deleted);
    Ok(Some(deleted))
}

/// Tries every minute until `token` is cancelled.
pub(crate) fn spawn(
    db: PgPool,
    retention: Duration,
    pod_id: String,
    token: CancellationToken,
    tracker: &TaskTracker,
) {
    tracker.spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = token.cancelled() => break,
                _ = tick.tick() => {}
            }
            match run_once(&db, slot_of(Utc::now(), SLOT), retention, &pod_id).await {
                Ok(Some(deleted)) if deleted > 0 => {
                    tracing::info!(deleted, "expired realtime events deleted");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "realtime event cleanup failed"),
            }
        }
    });
}
