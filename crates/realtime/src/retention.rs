//! Event retention: a scheduled job (once per slot across all pods, AA2) deletes events
//! older than `EVENTS_RETENTION_HOURS`. `run_once` claims a slot itself (for tools and tests).

use crate::events;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::time::Duration;
use switchboard_store::{PgPool, StoreError, inbox};

/// The `cron_runs.job` name.
pub const JOB: &str = "events-retention";
/// The default slot length (the scheduler reads `SCHEDULE_EVENTS_RETENTION`).
pub const SLOT: Duration = Duration::from_secs(15 * 60);

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

/// Deletes events older than `retention` (the scheduler's `events-retention` job, once per
/// slot across pods); returns how many went.
pub async fn delete_expired(db: &PgPool, retention: Duration) -> Result<u64, StoreError> {
    let cutoff = Utc::now()
        - chrono::Duration::from_std(retention).unwrap_or_else(|_| chrono::Duration::days(365));
    let deleted = events::delete_before(db, cutoff).await?;
    metrics::counter!("realtime_events_expired_total").increment(deleted);
    if deleted > 0 {
        tracing::info!(deleted, "expired realtime events deleted");
    }
    Ok(deleted)
}
