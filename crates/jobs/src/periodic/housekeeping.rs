//! The scheduler's and the queues' own housekeeping, each a scheduled job:
//! `queue-upkeep` (finished jobs vacuumed, gone workers forgotten, for both queues) and
//! `scheduler-prune` (old `cron_runs` rows, successful runs beyond each job's newest
//! `SCHEDULER_HISTORY_RUNS`, and alert claims deleted).
//!
//! The queues' promoter stays a plain 100 ms timer on every pod (`upkeep::spawn_promoter`):
//! it is not work to do once per slot but the hand-off that lets each pod's workers see due
//! jobs within 100 ms; its script is atomic and idempotent, so pods running it side by side
//! is harmless, while a claimed slot would cost a Postgres row per 100 ms per pod and stop
//! promotion for a whole lease whenever the claiming pod died.

use crate::queue::QueueRef;
use crate::queue::upkeep;
use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::JobName;
use switchboard_store::{PgPool, alert_claims, alert_incidents, cron_runs};

/// How long resolved incidents stay in `GET /alerts`' history.
const INCIDENTS_KEPT: Duration = Duration::from_secs(30 * 86_400);

/// Vacuums finished jobs and forgets gone workers of every queue.
pub struct QueueUpkeep {
    /// The queues (`channel-inbound`, `channel-outbound`).
    pub queues: Vec<QueueRef>,
}

#[async_trait]
impl Job for QueueUpkeep {
    fn name(&self) -> JobName {
        JobName::QueueUpkeep
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let mut detail = serde_json::Map::new();
        for queue in &self.queues {
            let vacuumed = upkeep::vacuum(queue).await?;
            let forgotten = upkeep::forget_gone_workers(queue).await?;
            detail.insert(
                queue.name().to_owned(),
                json!({"vacuumed": vacuumed, "workers_forgotten": forgotten}),
            );
        }
        Ok(Value::Object(detail))
    }
}

/// Deletes `cron_runs` rows and alert claims older than the history to keep, and each job's
/// successful runs beyond its newest `keep_runs`, so that a job on a schedule of seconds
/// keeps as many rows as one that runs every minute.
pub struct SchedulerPrune {
    /// Postgres.
    pub db: PgPool,
    /// The jobs whose runs are pruned.
    pub jobs: Vec<&'static str>,
    /// How long runs are kept.
    pub keep: Duration,
    /// Most successful runs kept per job.
    pub keep_runs: i64,
}

#[async_trait]
impl Job for SchedulerPrune {
    fn name(&self) -> JobName {
        JobName::SchedulerPrune
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let mut runs = 0;
        for job in &self.jobs {
            runs += cron_runs::prune(&self.db, job, self.keep, self.keep_runs).await?;
        }
        let alerts = alert_claims::prune(&self.db, self.keep).await?;
        let incidents = alert_incidents::prune(&self.db, INCIDENTS_KEPT).await?;
        Ok(json!({
            "runs_deleted": runs,
            "alert_claims_deleted": alerts,
            "incidents_deleted": incidents,
        }))
    }
}
