//! `events-retention`: a scheduled job (once per slot across all pods, AA2) deletes realtime
//! events older than `EVENTS_RETENTION_HOURS`.

use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::JobName;
use switchboard_store::events;
use switchboard_store::{PgPool, StoreError};

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

/// The scheduled deletion.
pub struct EventsRetention {
    /// Postgres.
    pub db: PgPool,
    /// How long events are kept.
    pub retention: Duration,
}

#[async_trait]
impl Job for EventsRetention {
    fn name(&self) -> JobName {
        JobName::EventsRetention
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let deleted = delete_expired(&self.db, self.retention).await?;
        Ok(json!({"deleted": deleted}))
    }
}
