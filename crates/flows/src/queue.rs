//! The `channel-inbound` queue on apalis-redis, and the supervised workers that drain it.
//!
//! apalis-redis is the fast path, not the truth: the inbox row in Postgres is. Known
//! behaviours of apalis-redis 1.0 handled here:
//! - an idle worker fetches only on its heartbeat unless polled: we poll every 150 ms;
//! - worker names are identities in Redis: ours are unique per pod, process, app instance
//!   and restart;
//! - one Redis error can leave a worker's backend dead: a supervisor restarts the worker;
//! - a job held by a dead worker returns only after heartbeat × missed heartbeats: we use
//!   5 s × 3, and the inbox sweeper is the backstop;
//! - finished jobs are acknowledged only with `persist_results(true)`, which keeps each job's
//!   data and result in Redis until vacuumed: the sweeper vacuums once per slot (with our own
//!   bounded script, see [`crate::upkeep`]);
//! - every push lands in the scheduled set, and a fetch moves *all* due scheduled jobs with
//!   one `unpack`, which fails past ~8000 and then kills every worker on every fetch: the
//!   promoter in [`crate::upkeep`] keeps the scheduled set small;
//! - a worker's metadata hash outlives it: names are recorded as workers start, and the
//!   sweeper deletes the metadata of gone ones ([`crate::upkeep::forget_gone_workers`]).

use crate::{Deps, inbound, upkeep};
use apalis::prelude::*;
use apalis_redis::{Config as QueueConfig, RedisStorage};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchboard_coord::Redis;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// The job argument: only the inbox id; everything else is read from Postgres.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboundJob {
    /// `inbound_events.id`.
    pub event_id: Uuid,
}

/// The job body: the idempotent F2 flow. An error leaves the event unprocessed in
/// Postgres, where the sweeper finds it again.
async fn handle(job: InboundJob, deps: Data<Deps>) -> Result<(), inbound::JobError> {
    match inbound::process(&deps, job.event_id).await {
        Ok(outcome) => {
            tracing::debug!(event_id = %job.event_id, ?outcome, "inbound job done");
            Ok(())
        }
        Err(e) => {
            tracing::warn!(event_id = %job.event_id, error = %e, "inbound job failed; the sweeper retries it");
            Err(e)
        }
    }
}

/// Producer handle for `channel-inbound`.
#[derive(Clone)]
pub struct InboundQueue {
    storage: RedisStorage<InboundJob>,
}

impl std::fmt::Debug for InboundQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InboundQueue")
    }
}

/// How often an idle worker asks for work.
pub const POLL_INTERVAL: Duration = Duration::from_millis(150);

impl InboundQueue {
    /// The queue under the pod's key prefix.
    pub fn new(redis: &Redis) -> Self {
        let config = QueueConfig::default()
            .queue(redis.key("queue:channel-inbound"))
            .heartbeat_interval(Duration::from_secs(5))
            .missed_heartbeats(3)
            // apalis-redis acknowledges a finished job (removes it from the worker's
            // in-flight set) only while persisting results. Without acks the in-flight sets
            // grow without bound, a restarted worker's orphans are all re-enqueued, and past
            // ~8000 the orphan script fails ("too many results to unpack") and kills workers.
            .persist_results(true)
            .emit_events(false);
        Self {
            storage: RedisStorage::new(redis.conn()).with_config(config),
        }
    }

    /// Enqueues many events with one bulk push.
    pub async fn push_many(&self, event_ids: &[Uuid]) -> Result<(), String> {
        let mut storage = self.storage.clone();
        storage
            .push_bulk(
                event_ids
                    .iter()
                    .map(|&event_id| InboundJob { event_id })
                    .collect(),
            )
            .await
            .map_err(|e| e.to_string())
    }

    /// The storage, for the queue's upkeep scripts.
    pub(crate) fn storage(&self) -> &RedisStorage<InboundJob> {
        &self.storage
    }

    /// Starts the supervised workers on `tracker`; they stop when `token` is cancelled,
    /// after finishing the jobs they hold.
    pub fn spawn_workers(
        &self,
        deps: Deps,
        identity: String,
        concurrency: usize,
        token: CancellationToken,
        tracker: &TaskTracker,
    ) {
        let queue = self.clone();
        tracker.spawn(async move {
            let mut restarts: u32 = 0;
            loop {
                let name = format!("{identity}-inbound-{restarts}");
                // Without Redis the worker fails to start too, and is restarted.
                if let Err(e) = upkeep::record_worker(&queue, &name).await {
                    tracing::debug!(worker = %name, error = %e, "could not record the worker name");
                }
                let worker = WorkerBuilder::new(name.clone())
                    .backend(queue.storage.clone().poll_with_interval(POLL_INTERVAL))
                    .data(deps.clone())
                    .concurrency(concurrency.max(1))
                    .build(handle);
                let stop = token.clone();
                let result = worker
                    .run_until(async move {
                        stop.cancelled().await;
                        Ok::<(), WorkerError>(())
                    })
                    .await;
                if token.is_cancelled() {
                    break;
                }
                restarts += 1;
                metrics::counter!("worker_restarts_total", "queue" => "channel-inbound")
                    .increment(1);
                tracing::error!(worker = %name, ?result, "inbound worker stopped; restarting");
                let backoff = Duration::from_millis(200 * u64::from(restarts.min(10)));
                tokio::select! {
                    () = token.cancelled() => break,
                    () = tokio::time::sleep(backoff) => {}
                }
            }
        });
    }
}
