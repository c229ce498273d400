//! `snooze-resurface`: snoozed items whose time has come go back to `pending`, in one
//! `UPDATE … RETURNING` per batch, with their `queue_item_updated` events stored in the same
//! transaction (so an event exists exactly when the change committed), and the relay woken
//! after the commit. Once per slot across pods, and the `UPDATE` only takes items still
//! snoozed, so an item comes back (and is announced) exactly once.

use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use switchboard_domain::{Emitter, Event, JobName};
use switchboard_jobs::scheduler::{Job, JobError, Run};
use switchboard_store::{PgPool, event_outbox, expert_queue};
use uuid::Uuid;

/// Items moved per transaction.
const BATCH: i64 = 500;

/// The scheduled job.
pub struct SnoozeResurface {
    /// Postgres.
    pub db: PgPool,
    /// The realtime relay, woken after each commit.
    pub emitter: Arc<dyn Emitter>,
}

#[async_trait]
impl Job for SnoozeResurface {
    fn name(&self) -> JobName {
        JobName::SnoozeResurface
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let mut total = 0;
        loop {
            let mut tx = self
                .db
                .begin()
                .await
                .map_err(switchboard_store::StoreError::from)?;
            let due = expert_queue::resurface_snoozed(&mut tx, BATCH).await?;
            let mut by_org: BTreeMap<Uuid, Vec<Event>> = BTreeMap::new();
            for resurfaced in &due {
                by_org
                    .entry(resurfaced.org_id)
                    .or_default()
                    .push(Event::QueueItemUpdated(resurfaced.item.clone()));
            }
            for (org, events) in &by_org {
                event_outbox::enqueue(&mut *tx, *org, events).await?;
            }
            tx.commit()
                .await
                .map_err(switchboard_store::StoreError::from)?;
            if due.is_empty() {
                break;
            }
            self.emitter.wake();
            total += due.len();
            if due.len() < BATCH as usize {
                break;
            }
        }
        if total > 0 {
            tracing::info!(
                count = total,
                "snoozed items came due and are pending again"
            );
        }
        Ok(json!({"resurfaced": total}))
    }
}
