//! Accept-path priority. A webhook must be answered within the provider's timeout (Slack
//! gives 3 s, then retries and eventually disables the app); turning it into a draft may
//! wait, because the event is already committed in the inbox. So when many webhooks are in
//! flight on a pod, that pod's workers start one job at a time instead of
//! `WORKER_CONCURRENCY`, and the CPU and connections go to answering. Processing never
//! stops (one job at a time still runs), so a burst is absorbed by the queue and drained
//! once it passes.
//!
//! The count is of this pod's own requests (like a pool's size, not business state, AA1).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Semaphore, SemaphorePermit};

/// The pod's webhook load; cheap to clone.
#[derive(Clone, Debug)]
pub struct AcceptLoad {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    in_flight: AtomicUsize,
    busy_at: usize,
    /// The one job that may start while the pod is busy.
    busy_lane: Semaphore,
}

/// Held while one webhook is answered.
#[derive(Debug)]
pub struct InFlight {
    inner: Arc<Inner>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.inner.in_flight.fetch_sub(1, Ordering::Relaxed) - 1;
        metrics::gauge!("webhooks_in_flight").set(now as f64);
    }
}

/// A job's permission to run; while busy it holds the single busy-lane permit.
#[derive(Debug)]
pub struct Turn<'a> {
    _lane: Option<SemaphorePermit<'a>>,
}

impl AcceptLoad {
    /// `busy_at` webhooks in flight make the pod busy; 0 never does.
    pub fn new(busy_at: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                in_flight: AtomicUsize::new(0),
                busy_at,
                busy_lane: Semaphore::new(1),
            }),
        }
    }

    /// Counts one webhook until the guard drops.
    pub fn enter(&self) -> InFlight {
        let now = self.inner.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        metrics::gauge!("webhooks_in_flight").set(now as f64);
        InFlight {
            inner: self.inner.clone(),
        }
    }

    /// Webhooks in flight right now.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the pod is busy answering webhooks.
    pub fn busy(&self) -> bool {
        self.inner.busy_at > 0 && self.in_flight() >= self.inner.busy_at
    }

    /// Waits for a job's turn: at once while the pod is calm, else for the busy lane (one
    /// job at a time). A job that waited re-checks, so it runs freely once the burst ends.
    pub async fn admit(&self) -> Turn<'_> {
        if !self.busy() {
            return Turn { _lane: None };
        }
        metrics::counter!("jobs_deferred_to_webhooks_total").increment(1);
        let permit = self.inner.busy_lane.acquire().await.ok();
        Turn {
            _lane: permit.filter(|_| self.busy()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn busy_pod_runs_one_job_at_a_time_and_calm_pod_runs_all() {
        let load = AcceptLoad::new(2);
        let calm = (load.admit().await, load.admit().await);
        assert!(calm.0._lane.is_none() && calm.1._lane.is_none());

        let guards = (load.enter(), load.enter());
        assert!(load.busy());
        let first = load.admit().await;
        assert!(first._lane.is_some(), "a busy pod still runs one job");
        let second = tokio::time::timeout(Duration::from_millis(50), load.admit()).await;
        assert!(second.is_err(), "a second job waits while the first runs");

        drop(guards);
        assert!(!load.busy());
        drop(first);
        let after = load.admit().await;
        assert!(after._lane.is_none(), "the burst is over: no lane needed");
    }

    #[tokio::test]
    async fn zero_threshold_never_defers() {
        let load = AcceptLoad::new(0);
        let _guards: Vec<_> = (0..100).map(|_| load.enter()).collect();
        assert!(!load.busy());
        assert!(load.admit().await._lane.is_none());
    }
}
