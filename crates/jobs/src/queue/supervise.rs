//! Workers that come back after a backend error.

use super::QueueRef;
use crate::queue::upkeep;
use apalis::prelude::WorkerError;
use std::time::Duration;
use switchboard_domain::backoff::Backoff;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How often workers that wait for Redis try again.
const WAIT_FOR_REDIS: Duration = Duration::from_millis(500);
/// Waits before a stopped worker is started again: 200 ms, doubled per restart, at most 2 s.
const RESTART: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(2));

/// Runs the worker that `run` builds and runs for a name, restarting it under a new name after it
/// stops on an error (a backend error can leave an apalis worker dead), until `token` is
/// cancelled; then the worker finishes the jobs it holds.
pub fn supervise<F, Fut>(
    queue: QueueRef,
    identity: String,
    token: CancellationToken,
    tracker: &TaskTracker,
    run: F,
) where
    F: Fn(String, CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), WorkerError>> + Send,
{
    tracker.spawn(async move {
        let mut restarts: u32 = 0;
        loop {
            let name = format!("{identity}-{}-{restarts}", queue.name());
            // A worker started while the queue's Redis node cannot take a write dies at
            // once; restarting it in a loop would say nothing `/ready` does not. So the
            // worker starts once its name is recorded (a write to the queue's slot).
            let mut waiting = false;
            while let Err(e) = upkeep::record_worker(&queue, &name).await {
                if !waiting {
                    waiting = true;
                    tracing::warn!(queue = queue.name(), error = %e, "queue workers wait for Redis (see /ready)");
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(WAIT_FOR_REDIS) => {}
                }
            }
            if waiting {
                tracing::info!(queue = queue.name(), "Redis takes writes again; starting the queue workers");
            }
            let result = run(name.clone(), token.clone()).await;
            if token.is_cancelled() {
                break;
            }
            restarts += 1;
            metrics::counter!("worker_restarts_total", "queue" => queue.name()).increment(1);
            tracing::error!(worker = %name, ?result, "worker stopped; restarting");
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep(RESTART.delay(restarts)) => {}
            }
        }
    });
}

/// Starts the supervised workers of `queue` that run `handle` for each job, `concurrency` jobs
/// at a time, until `token` is cancelled; then they finish the jobs they hold.
///
/// A macro rather than a generic function: apalis's `build` takes the handler through
/// bounds over the backend, the service and the job context that a generic function would
/// have to spell out in full. Needs `apalis::prelude::*` in scope where it is used.
#[macro_export]
macro_rules! spawn_supervised_workers {
    ($queue:expr, $handle:expr, $deps:expr, $identity:expr, $concurrency:expr, $token:expr, $tracker:expr $(,)?) => {{
        let queue = $queue.clone();
        let deps = $deps;
        let concurrency: usize = $concurrency;
        $crate::queue::supervise(
            queue.queue_ref(),
            $identity,
            $token,
            $tracker,
            move |name, stop| {
                WorkerBuilder::new(name)
                    .backend(queue.backend())
                    .data(deps.clone())
                    .concurrency(concurrency.max(1))
                    .build($handle)
                    .run_until(async move {
                        stop.cancelled().await;
                        Ok::<(), WorkerError>(())
                    })
            },
        );
    }};
}
