//! Event retention: a scheduled job (once per slot across all pods, AA2) deletes events
//! older than `EVENTS_RETENTION_HOURS`.

use crate::events;
use chrono::Utc;
use std::time::Duration;
use switchboard_store::{PgPool, StoreError};

/// The default slot length (the scheduler reads `SCHEDULE_EVENTS_RETENTION`).
pub const SLOT: Duration = Duration::from_secs(15 * 60);

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
