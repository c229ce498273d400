//! Accept-path priority. A webhook must be answered within the provider's timeout (Slack
//! gives 3 s, then retries and eventually disables the app); turning it into a draft may
//! wait, because the event is already committed in the inbox. So when many webhooks are in
//! flight on a pod, its jobs do their database work one at a time instead of up to
//! `WORKER_CONCURRENCY` at once, and the CPU and connections go to answering. A job waiting
//! for the agent holds no turn, so a slow agent never stalls the pod's processing.
//!
//! The pod counts as busy until it has been calm for [`CALM_AFTER`]: without that, workers
//! would switch back to full concurrency in every lull of a sustained burst, and the jobs
//! started then would slow the next webhooks down. Processing never stops (one job's
//! database work at a time still runs), so a burst is absorbed by the queue and drained
//! once it passes.
//!
//! The count is of this pod's own requests (like a pool's size, not business state, AA1).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, SemaphorePermit};

/// How long a pod stays busy after its in-flight webhooks last reached the threshold.
pub const CALM_AFTER: Duration = Duration::from_secs(1);

/// The pod's webhook load; cheap to clone.
#[derive(Clone, Debug)]
pub struct AcceptLoad {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    in_flight: AtomicUsize,
    busy_at: usize,
    /// Reference point of `busy_until_ms`.
    epoch: Instant,
    /// Milliseconds after `epoch` until which the pod counts as busy.
    busy_until_ms: AtomicU64,
    /// The one job that may start while the pod is busy.
    busy_lane: Semaphore,
}

impl Inner {
    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
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
                epoch: Instant::now(),
                busy_until_ms: AtomicU64::new(0),
                busy_lane: Semaphore::new(1),
            }),
        }
    }

    /// Counts one webhook until the guard drops.
    pub fn enter(&self) -> InFlight {
        let now = self.inner.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        metrics::gauge!("webhooks_in_flight").set(now as f64);
        if self.inner.busy_at > 0 && now >= self.inner.busy_at {
            let until = self.inner.millis() + CALM_AFTER.as_millis() as u64;
            self.inner.busy_until_ms.fetch_max(until, Ordering::Relaxed);
        }
        InFlight {
            inner: self.inner.clone(),
        }
    }

    /// Webhooks in flight right now.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the pod is busy answering webhooks: at the threshold now, or within
    /// [`CALM_AFTER`] of it.
    pub fn busy(&self) -> bool {
        self.inner.busy_at > 0
            && (self.in_flight() >= self.inner.busy_at
                || self.inner.millis() < self.inner.busy_until_ms.load(Ordering::Relaxed))
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
        assert!(load.busy(), "still busy right after the burst");
        drop(first);
        tokio::time::sleep(CALM_AFTER + Duration::from_millis(50)).await;
        assert!(!load.busy());
        let after = load.admit().await;
        assert!(after._lane.is_none(), "calm again: no lane needed");
    }

    #[tokio::test]
    async fn zero_threshold_never_defers() {
        let load = AcceptLoad::new(0);
        let _guards: Vec<_> = (0..100).map(|_| load.enter()).collect();
        assert!(!load.busy());
        assert!(load.admit().await._lane.is_none());
    }
}
