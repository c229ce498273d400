//! The supervised `channel-inbound` workers (the queue and its upkeep are
//! `switchboard_jobs::queue`, shared with `channel-outbound`, whose workers are
//! `dispatch::worker`).

use crate::Deps;
use apalis::prelude::*;
use switchboard_domain::jobs::InboundJob;
use switchboard_domain::trace;
use switchboard_jobs::queue::InboundQueue;
use switchboard_jobs::spawn_supervised_workers;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use tracing::field::Empty;

/// The job body: the idempotent F2 flow, in the `channel_inbound` span that continues the
/// webhook's trace on whichever pod runs it (the job's trace, else the row's: see
/// `process`). An error leaves the event unprocessed in Postgres, where the sweeper finds
/// it again.
async fn handle(job: InboundJob, deps: Data<Deps>) -> Result<(), super::JobError> {
    let span = tracing::info_span!(
        "channel_inbound",
        otel.kind = "consumer",
        event_id = %job.event_id,
        org_id = Empty,
        channel = Empty,
        connection_id = Empty,
        outcome = Empty,
        otel.status_code = Empty,
    );
    trace::continue_in(&span, job.traceparent.as_ref());
    let result = super::process(&deps, job.event_id)
        .instrument(span.clone())
        .await;
    span.record(
        "outcome",
        result.as_ref().map_or("error", super::Outcome::name),
    );
    if result.is_err() {
        span.record("otel.status_code", "ERROR");
    }
    match result {
        Ok(outcome) => {
            tracing::debug!(event_id = %job.event_id, ?outcome, "inbound job done");
            if !matches!(
                outcome,
                super::Outcome::HeldElsewhere | super::Outcome::Waiting
            ) {
                deps.load.processed(1);
            }
            Ok(())
        }
        Err(e) => {
            tracing::warn!(event_id = %job.event_id, error = %e, "inbound job failed; the sweeper retries it");
            Err(e)
        }
    }
}

/// Starts `concurrency` supervised workers of `queue` on `tracker`; they stop when `token`
/// is cancelled, after finishing the jobs they hold.
pub fn spawn_workers(
    queue: &InboundQueue,
    deps: Deps,
    identity: String,
    concurrency: usize,
    token: CancellationToken,
    tracker: &TaskTracker,
) {
    spawn_supervised_workers!(queue, handle, deps, identity, concurrency, token, tracker);
}
