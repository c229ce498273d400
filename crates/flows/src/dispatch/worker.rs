//! The supervised `channel-outbound` workers (the queue's upkeep and restarts are shared
//! with `channel-inbound`, see `switchboard_jobs::queue`) and the delayed push that reschedules a row.

use super::process;
use crate::Deps;
use apalis::prelude::*;
use std::time::Duration;
use switchboard_domain::jobs::OutboundJob;
use switchboard_domain::trace;
use switchboard_jobs::spawn_supervised_workers;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use tracing::field::Empty;
use uuid::Uuid;

/// The job body, in the `channel_outbound` span that continues the release's trace (the
/// job's, else the row's: see `process`). An error leaves the row unsent in Postgres, where
/// the outbox sweeper finds it again once the lease has lapsed.
async fn handle(job: OutboundJob, deps: Data<Deps>) -> Result<(), super::DispatchError> {
    let span = tracing::info_span!(
        "channel_outbound",
        otel.kind = "consumer",
        outbox_id = %job.outbox_id,
        org_id = Empty,
        channel = Empty,
        connection_id = Empty,
        attempt = Empty,
        outcome = Empty,
        otel.status_code = Empty,
    );
    trace::continue_in(&span, job.traceparent.as_ref());
    let result = process(&deps, job.outbox_id).instrument(span.clone()).await;
    match result {
        Ok(outcome) => {
            span.record("outcome", outcome.name());
            tracing::debug!(outbox_id = %job.outbox_id, ?outcome, "outbound job done");
            Ok(())
        }
        Err(e) => {
            span.record("outcome", "error");
            span.record("otel.status_code", "ERROR");
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
    // The later run continues this run's trace: one release, one trace, however many runs.
    let task = TaskBuilder::new(OutboundJob {
        outbox_id,
        traceparent: trace::current(),
    })
    .run_after(wait + Duration::from_secs(1))
    .build();
    if let Err(e) = storage.push_task(task).await {
        tracing::warn!(%outbox_id, error = %e, "could not reschedule the outbound job; the outbox sweeper will");
    }
}
