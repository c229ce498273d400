//! Sharing a pod between answering webhooks and processing them.
//!
//! A webhook must be answered within the provider's timeout (Slack gives 3 s, then retries
//! and eventually disables the app); turning it into a draft may wait, because the event is
//! already committed in the inbox. So while the backlog is small, accepting may have
//! priority (`ACCEPT_PRIORITY_IN_FLIGHT`, off by default): when that many webhooks are in
//! flight on a pod, its jobs do their database work one at a time instead of all at once,
//! and the CPU and connections go to answering. One job at a time processes fewer events
//! than a moderate load brings, though, so by default jobs never give way and pacing alone
//! protects the split. A job waiting
//! for the agent holds no turn, so a slow agent never stalls the pod's processing. The pod
//! counts as busy until it has been calm for [`CALM_AFTER`]: without that, workers would
//! switch back to full concurrency in every lull of a sustained burst.
//!
//! Once the inbound backlog reaches `PACING_BACKLOG` (waiting jobs, as the pod's sampler
//! last counted them), accepting has outrun processing, and priority alone would starve the
//! workers for as long as the webhooks keep coming. Then the roles turn: jobs no longer
//! give way, and each webhook waits for a credit before it is committed. Every event the
//! pod processes adds `ACCEPT_PER_PROCESSED` credits, so under a load the box cannot carry,
//! the pod accepts at most that many webhooks per event it processes and processing keeps
//! its share of the CPU. A webhook waits at most `PACING_MAX_WAIT_MS` (then it is accepted
//! anyway), so a processing stall (a slow agent) slows webhooks down but never fails them.
//! A pod without workers mints no credits and never paces.
//!
//! The counts are of this pod's own requests and jobs (like a pool's size, not business
//! state, AA1).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, SemaphorePermit};

/// How long a pod stays busy after its in-flight webhooks last reached the threshold.
pub const CALM_AFTER: Duration = Duration::from_secs(1);

/// Events' worth of credits a pod keeps at most: what a lull lets it bank, and so the burst
/// it accepts unpaced afterwards.
const CREDIT_STOCK_EVENTS: usize = 64;

/// When and how a pod paces its webhooks by its processing.
#[derive(Debug, Clone, Copy)]
pub struct PacingPolicy {
    /// Waiting inbound jobs at which pacing starts (`PACING_BACKLOG`); 0 never paces.
    pub backlog_at: usize,
    /// Webhooks accepted per event processed (`ACCEPT_PER_PROCESSED`); 0 never paces.
    pub per_processed: usize,
    /// Longest a webhook waits for a credit (`PACING_MAX_WAIT_MS`).
    pub max_wait: Duration,
}

impl PacingPolicy {
    /// Never paces (pods without workers, tests of other things).
    pub const OFF: Self = Self {
        backlog_at: 0,
        per_processed: 0,
        max_wait: Duration::ZERO,
    };

    fn on(&self) -> bool {
        self.backlog_at > 0 && self.per_processed > 0
    }
}

/// How a webhook fared with pacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paced {
    /// No backlog: not paced.
    Free,
    /// It took a credit.
    Credited,
    /// No credit came within the longest wait; accepted anyway.
    TimedOut,
}

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
    pacing: PacingPolicy,
    /// Waiting inbound jobs, as last sampled.
    backlog: AtomicUsize,
    /// Webhooks the pod may accept while pacing.
    credits: Semaphore,
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
    pub fn new(busy_at: usize, pacing: PacingPolicy) -> Self {
        Self {
            inner: Arc::new(Inner {
                in_flight: AtomicUsize::new(0),
                busy_at,
                epoch: Instant::now(),
                busy_until_ms: AtomicU64::new(0),
                busy_lane: Semaphore::new(1),
                pacing,
                backlog: AtomicUsize::new(0),
                credits: Semaphore::new(0),
            }),
        }
    }

    /// Records the inbound backlog (waiting jobs) the sampler counted.
    pub fn set_backlog(&self, waiting: usize) {
        self.inner.backlog.store(waiting, Ordering::Relaxed);
        metrics::gauge!("webhooks_pacing").set(if self.pacing() { 1.0 } else { 0.0 });
    }

    /// Whether the backlog is at the pacing threshold: webhooks wait for credits and jobs
    /// do not give way.
    pub fn pacing(&self) -> bool {
        let policy = &self.inner.pacing;
        policy.on() && self.inner.backlog.load(Ordering::Relaxed) >= policy.backlog_at
    }

    /// Waits for a webhook's credit while pacing (at most the policy's longest wait).
    pub async fn pace(&self) -> Paced {
        if !self.pacing() {
            return Paced::Free;
        }
        let started = Instant::now();
        let credit =
            tokio::time::timeout(self.inner.pacing.max_wait, self.inner.credits.acquire()).await;
        metrics::histogram!("webhook_pacing_wait_seconds").record(started.elapsed().as_secs_f64());
        match credit {
            Ok(Ok(permit)) => {
                permit.forget();
                Paced::Credited
            }
            _ => {
                metrics::counter!("webhooks_pacing_timed_out_total").increment(1);
                Paced::TimedOut
            }
        }
    }

    /// Counts `events` processed by this pod: while pacing, each is worth
    /// `ACCEPT_PER_PROCESSED` webhooks, up to a bounded stock.
    pub fn processed(&self, events: usize) {
        if !self.pacing() {
            return;
        }
        let policy = &self.inner.pacing;
        let stock = CREDIT_STOCK_EVENTS * policy.per_processed;
        let room = stock.saturating_sub(self.inner.credits.available_permits());
        self.inner
            .credits
            .add_permits(room.min(events * policy.per_processed));
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

    /// Waits for a job's turn: at once while the pod is calm or pacing, else for the busy
    /// lane (one job at a time). A job that waited re-checks, so it runs freely once the
    /// burst ends.
    pub async fn admit(&self) -> Turn<'_> {
        if !self.busy() || self.pacing() {
            return Turn { _lane: None };
        }
        metrics::counter!("jobs_deferred_to_webhooks_total").increment(1);
        let permit = self.inner.busy_lane.acquire().await.ok();
        Turn {
            _lane: permit.filter(|_| self.busy() && !self.pacing()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn busy_pod_runs_one_job_at_a_time_and_calm_pod_runs_all() {
        let load = AcceptLoad::new(2, PacingPolicy::OFF);
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
        let load = AcceptLoad::new(0, PacingPolicy::OFF);
        let _guards: Vec<_> = (0..100).map(|_| load.enter()).collect();
        assert!(!load.busy());
        assert!(load.admit().await._lane.is_none());
    }

    fn pacing_policy() -> PacingPolicy {
        PacingPolicy {
            backlog_at: 100,
            per_processed: 2,
            max_wait: Duration::from_millis(200),
        }
    }

    #[tokio::test]
    async fn below_the_backlog_threshold_webhooks_are_not_paced() {
        let load = AcceptLoad::new(2, pacing_policy());
        load.set_backlog(99);
        assert!(!load.pacing());
        assert_eq!(load.pace().await, Paced::Free);
        load.processed(10);
        load.set_backlog(100);
        let waited = tokio::time::timeout(Duration::from_millis(50), load.pace()).await;
        assert!(
            waited.is_err(),
            "credits minted before pacing are not banked"
        );
    }

    #[tokio::test]
    async fn a_paced_pod_accepts_per_processed_event_and_stops_deferring_jobs() {
        let load = AcceptLoad::new(1, pacing_policy());
        let _webhooks: Vec<_> = (0..5).map(|_| load.enter()).collect();
        load.set_backlog(5_000);
        let turns = (load.admit().await, load.admit().await);
        assert!(
            turns.0._lane.is_none() && turns.1._lane.is_none(),
            "a backlog owes processing its share: no job gives way"
        );
        load.processed(1);
        assert_eq!(load.pace().await, Paced::Credited);
        assert_eq!(load.pace().await, Paced::Credited);
        let third = tokio::time::timeout(Duration::from_millis(50), load.pace()).await;
        assert!(third.is_err(), "two webhooks per processed event");
    }

    #[tokio::test]
    async fn a_paced_webhook_waits_at_most_the_longest_wait() {
        let load = AcceptLoad::new(2, pacing_policy());
        load.set_backlog(5_000);
        let started = Instant::now();
        assert_eq!(load.pace().await, Paced::TimedOut);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn the_credit_stock_is_bounded() {
        let load = AcceptLoad::new(2, pacing_policy());
        load.set_backlog(5_000);
        load.processed(10_000);
        assert_eq!(
            load.inner.credits.available_permits(),
            CREDIT_STOCK_EVENTS * 2
        );
    }

    #[tokio::test]
    async fn pacing_off_never_paces() {
        let load = AcceptLoad::new(2, PacingPolicy::OFF);
        load.set_backlog(usize::MAX);
        assert!(!load.pacing());
        assert_eq!(load.pace().await, Paced::Free);
    }
}
