//! The supervised `channel-outbound` workers (the queue's upkeep and restarts are shared
//! with `channel-inbound`, see `switchboard_jobs::queue`) and the delayed push that reschedules a row.

use super::process;
use crate::Deps;
use apalis::prelude::*;
use std::time::Duration;
use switchboard_domain::jobs::OutboundJob;
use switchboard_jobs::spawn_supervised_workers;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// The job body. An error leaves the row unsent in Postgres, where the outbox sweeper finds
/// it again once the lease has lapsed.
async fn handle(job: OutboundJob, deps: Data<Deps>) -> Result<(), super::DispatchError> {
    match process(&deps, job.outbox_id).await {
        Ok(outcome) => {
            tracing::debug!(outbox_id = %job.outbox_id, ?outcome, "outbound job done");
            Ok(())
        }
        Err(e) => {
            tracing::warn!(outbox_id = %job.outbox_id, error = %e, "outbound job failed; the outbox sweeper retries it");
            Err(e)
        }
    }
}

/// Starts `concurrency` supervised workers on `tracker`; they stop when `token` is
/// cancelled, after finishing the jobs they hold.
pub fn spawn_workers(
    deps: Deps,
    identity: String,
    concurrency: usize,
    token: CancellationToken,
    tracker: &TaskTracker,
) {
    spawn_supervised_workers!(
        deps.outbound,
        handle,
        deps,
        identity,
        concurrency,
        token,
        tracker
    );
}

/// Pushes the row's job to run after `wait`. apalis-redis schedules in whole seconds,
/// rounding down; a job that came early and found its row not due for longer than a worker
/// waits would be dropped, so the push is rounded up instead (up to a second late). A failed
/// push is left to the outbox sweeper.
pub async fn push_after(deps: &Deps, outbox_id: Uuid, wait: Duration) {
    let mut storage = deps.outbound.storage().clone();
    let task = TaskBuilder::new(OutboundJob { outbox_id })
        .run_after(wait + Duration::from_secs(1))
        .build();
    if let Err(e) = storage.push_task(task).await {
        tracing::warn!(%outbox_id, error = %e, "could not reschedule the outbound job; the outbox sweeper will");
    }
}
