//! The one way a pod runs background work that repeats (queue promotion, gauges, session and
//! subscription checks, sweeps): on the pod's [`TaskTracker`], stopped by its shutdown
//! [`CancellationToken`], so a draining pod waits for a run in progress and starts no new one.
//! A failing run is logged once per outage and once on recovery, not on every tick: a
//! Postgres or Redis outage would otherwise print a line per task per second.

use std::fmt::Display;
use std::time::Duration;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Runs `work` at once and then every `period` (a slow run delays the next tick rather than
/// bunching them) until `token` is cancelled. `name` labels the outage log lines.
pub fn every<F, Fut, E>(
    name: &'static str,
    period: Duration,
    token: &CancellationToken,
    tracker: &TaskTracker,
    mut work: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: Display,
{
    let token = token.clone();
    tracker.spawn(async move {
        let mut tick = tokio::time::interval(period.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut outage = Outage::new(name);
        loop {
            tokio::select! {
                () = token.cancelled() => break,
                _ = tick.tick() => {}
            }
            outage.note(work().await);
        }
    });
}

/// Runs `work` at once and again after whatever pause it returns, until `token` is
/// cancelled: for loops whose pace depends on the outcome (faster while failing).
pub fn paced<F, Fut>(token: &CancellationToken, tracker: &TaskTracker, mut work: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Duration> + Send,
{
    let token = token.clone();
    tracker.spawn(async move {
        while !token.is_cancelled() {
            let pause = work().await;
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
    });
}

/// Runs `task` outside the tracker: for a batcher whose every piece of work has a caller
/// awaiting it and that ends when its last handle is dropped. Tracking it would make shutdown
/// wait for those handles, which live as long as the pod's state; the callers' own requests
/// are what shutdown drains.
pub fn detach<Fut>(task: Fut)
where
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(task);
}

/// Whether a repeating task is failing, so that it says so on the first failure and on the
/// first success after, and counts the runs in between quietly.
#[derive(Debug)]
struct Outage {
    name: &'static str,
    failing: bool,
}

impl Outage {
    /// A task called `name`, not failing.
    fn new(name: &'static str) -> Outage {
        Outage {
            name,
            failing: false,
        }
    }

    /// Records one run's outcome; returns whether the task is failing now.
    fn note<E: Display>(&mut self, outcome: Result<(), E>) -> bool {
        match outcome {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!(task = self.name, "background task works again");
            }
            Ok(()) => {}
            Err(error) if !self.failing => {
                self.failing = true;
                tracing::warn!(task = self.name, %error, "background task failed; retrying on its schedule");
            }
            Err(error) => {
                tracing::debug!(task = self.name, %error, "background task still failing")
            }
        }
        self.failing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn every_runs_at_once_then_on_the_period_until_cancelled() {
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        let runs = Arc::new(AtomicU32::new(0));
        let counter = runs.clone();
        every(
            "test",
            Duration::from_secs(10),
            &token,
            &tracker,
            move || {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), std::io::Error>(())
                }
            },
        );
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "at 0, 10 and 20 s");
        token.cancel();
        tracker.close();
        tracker.wait().await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "nothing after the cancel");
    }

    #[tokio::test(start_paused = true)]
    async fn paced_waits_what_the_run_returns() {
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        let runs = Arc::new(AtomicU32::new(0));
        let counter = runs.clone();
        paced(&token, &tracker, move || {
            let counter = counter.clone();
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                if n < 2 {
                    Duration::from_secs(1)
                } else {
                    Duration::from_secs(100)
                }
            }
        });
        tokio::time::sleep(Duration::from_secs(50)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            3,
            "at 0, 1 and 2 s, then one long pause"
        );
        token.cancel();
        tracker.close();
        tracker.wait().await;
    }

    #[test]
    fn an_outage_is_reported_once_and_its_end_too() {
        let mut outage = Outage::new("test");
        assert!(!outage.note(Ok::<(), &str>(())));
        assert!(outage.note(Err("down")));
        assert!(outage.note(Err("still down")));
        assert!(!outage.note(Ok::<(), &str>(())));
    }
}
