//! Process lifecycle (AA8): one cancellation token owns every long-running task; draining
//! flips readiness before anything stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Shared by the server, the readiness probe and every background task of one pod.
#[derive(Clone, Debug, Default)]
pub struct Lifecycle {
    draining: Arc<AtomicBool>,
    drain_requested: CancellationToken,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Lifecycle {
    /// A fresh lifecycle.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once shutdown has begun: `/ready` answers 503.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Starts draining: readiness turns 503 at once; the listener keeps serving until the
    /// drain delay is over so the load balancer can take the pod out first.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.drain_requested.cancel();
    }

    /// Resolves when draining begins.
    pub async fn drain_requested(&self) {
        self.drain_requested.cancelled().await;
    }

    /// The token every long-running task watches; cancelled after the drain delay.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops the listener and asks every task to finish its current work.
    pub fn stop(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.drain_requested.cancel();
        self.shutdown.cancel();
    }

    /// The tracker background tasks are spawned on, so shutdown can wait for them.
    pub fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }
}
