//! Processed inbox events are kept for `INBOX_RETENTION_DAYS` (longer than any provider
//! retries a webhook, so the unique index still recognises every retry) and then deleted,
//! so `inbound_events` does not grow for ever. A scheduled job (once per slot across all
//! pods, AA2), in chunks, so no statement holds many row locks or runs long while webhooks
//! are committed. Unprocessed and parked events are never pruned.

use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::JobName;
use switchboard_store::{PgPool, StoreError, inbox};

/// Rows deleted per statement.
const CHUNK: i64 = 5_000;

/// Most rows one slot deletes; a backlog (the first run on an old table) spreads over slots.
const MAX_PER_SLOT: u64 = 500_000;

/// Deletes processed events received longer than `retention` ago; returns how many went.
pub async fn prune(db: &PgPool, retention: Duration) -> Result<u64, StoreError> {
    let mut deleted = 0;
    loop {
        let n = inbox::prune_processed(db, retention, CHUNK).await?;
        deleted += n;
        if n < CHUNK as u64 || deleted >= MAX_PER_SLOT {
            break;
        }
    }
    if deleted > 0 {
        tracing::info!(
            deleted,
            "pruned processed inbox events past their retention"
        );
    }
    metrics::counter!("inbox_events_pruned_total").increment(deleted);
    Ok(deleted)
}

/// The scheduled job.
pub struct InboxRetention {
    /// Postgres.
    pub db: PgPool,
    /// Processed events received longer ago than this are deleted.
    pub retention: Duration,
}

#[async_trait]
impl Job for InboxRetention {
    fn name(&self) -> JobName {
        JobName::InboxRetention
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let deleted = prune(&self.db, self.retention).await?;
        Ok(json!({"deleted": deleted}))
    }
}
