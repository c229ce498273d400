//! Fault injection for the tests of the release transaction: a test arms a step, and the
//! next release fails there (everything before it must roll back) or stops there for ever
//! (as if the pod died at that instant, so a test can kill it at exactly that point).
//!
//! A release can also be stopped at a step until the test lets it go (to interleave another
//! request at exactly that point). The outbound job has its own: its fenced writes can be
//! made to fail as if Postgres had (to show they are retried while the lease lasts), and a
//! job can be stopped at a point until the test lets it go (to take its lease over at
//! exactly that instant).
//!
//! The intake writer can be made to stop every batch between its dedup claims and its commit
//! (a pod killed there), and a customer erasure to fail or stop just before its commit.
//!
//! A pod is armed only in-process by a test, or at start-up from `FAULT_INJECT` with
//! `APP_ENV=test`; production refuses to start with `FAULT_INJECT` set. Unarmed, a check is
//! one uncontended lock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

/// The points of the release transaction (F3), in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The queue item's `UPDATE` ran.
    AfterTransition,
    /// The outbound message and its outbox row were inserted.
    AfterOutbox,
    /// The audit row and the realtime events were stored.
    AfterEvents,
    /// The transaction committed; the job is not pushed and the relay not woken yet.
    AfterCommit,
}

impl Step {
    /// Every step, in order.
    pub const ALL: [Step; 4] = [
        Step::AfterTransition,
        Step::AfterOutbox,
        Step::AfterEvents,
        Step::AfterCommit,
    ];

    fn name(self) -> &'static str {
        match self {
            Step::AfterTransition => "after_transition",
            Step::AfterOutbox => "after_outbox",
            Step::AfterEvents => "after_events",
            Step::AfterCommit => "after_commit",
        }
    }
}

/// What an armed step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The step fails with [`Injected`].
    Fail,
    /// The step never returns.
    Hang,
}

/// The error an armed step returns.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("fault injected at {0:?}")]
pub struct Injected(pub Step);

/// The error of an erasure armed to fail before its commit.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("fault injected before the erasure's commit")]
pub struct ErasureInjected;

/// Why `FAULT_INJECT` could not be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "FAULT_INJECT must be release:<step>:fail|hang, with step one of after_transition, after_outbox, \
     after_events, after_commit, scheduler:<job>:hang or erasure:before_commit:hang"
)]
pub struct BadFaultSpec;

/// Points of the outbound job (`channel-outbound`) where a test can stop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchPoint {
    /// The provider accepted a part; its id is not recorded yet.
    PartAccepted,
}

/// A stop armed at a step of the release or a point of the outbound job: the first request
/// or job to reach it waits there until [`Paused::resume`].
#[derive(Debug, Clone)]
pub struct Paused(Arc<Gate>);

#[derive(Debug, Default)]
struct Gate {
    reached: Notify,
    resume: Notify,
}

impl Paused {
    async fn wait(&self) {
        self.0.reached.notify_one();
        self.0.resume.notified().await;
    }

    /// Returns once a request or job has stopped at the point.
    pub async fn reached(&self) {
        self.0.reached.notified().await;
    }

    /// Lets the stopped request or job (or the next one to arrive) go on.
    pub fn resume(&self) {
        self.0.resume.notify_one();
    }
}

#[derive(Debug, Default)]
struct DispatchFaults {
    /// How many of the next fenced writes fail.
    failing_writes: AtomicU32,
    pause: Mutex<Option<(DispatchPoint, Paused)>>,
}

/// The pod's armed faults, if any.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    release: Arc<Mutex<Option<(Step, Fault)>>>,
    /// A scheduled job whose first attempt of every slot stops for ever (its lease still
    /// renewed), as a run that is killed mid-way.
    scheduler_hang: Arc<Mutex<Option<String>>>,
    /// A release step where the next release stops until resumed.
    release_pause: Arc<Mutex<Option<(Step, Paused)>>>,
    dispatch: Arc<DispatchFaults>,
    /// Every intake batch stops right after its dedup claims, before its commit.
    intake_crash: Arc<std::sync::atomic::AtomicBool>,
    /// How many of the next customer erasures fail after their Redis cleanup, before their
    /// Postgres commit (as a pod that died there).
    erasure_failures: Arc<AtomicU32>,
    /// Every customer erasure stops for ever just before its Postgres commit, its
    /// transaction open, so a test can kill the pod at exactly that point.
    erasure_hang: Arc<std::sync::atomic::AtomicBool>,
}

impl Faults {
    /// The next `n` customer erasures fail after their Redis cleanup, before their Postgres
    /// commit: nothing of theirs is committed and the erasure stays to be taken up again.
    pub fn fail_erasures(&self, n: u32) {
        self.erasure_failures.store(n, Ordering::SeqCst);
    }

    /// Where a customer erasure is about to commit: fails if a failure is armed (using it
    /// up), never returns if `erasure:before_commit:hang` is.
    pub async fn erasure_point(&self) -> Result<(), ErasureInjected> {
        if self.erasure_hang.load(Ordering::SeqCst) {
            tracing::warn!("fault injected: this erasure stops before its commit");
            std::future::pending::<()>().await;
        }
        match self
            .erasure_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        {
            Ok(_) => Err(ErasureInjected),
            Err(_) => Ok(()),
        }
    }

    /// While `armed`, every intake batch stops right after its dedup claims, before the
    /// commit, as if the pod died there: its requests get no answer (the handler sees the
    /// writer gone) and the claims stay in Redis.
    pub fn crash_intake_after_claim(&self, armed: bool) {
        self.intake_crash.store(armed, Ordering::SeqCst);
    }

    /// Whether intake batches stop before their commit (see
    /// [`Faults::crash_intake_after_claim`]).
    pub fn intake_crashes_after_claim(&self) -> bool {
        self.intake_crash.load(Ordering::SeqCst)
    }

    /// Parses `release:<step>:fail|hang`, `scheduler:<job>:hang` or
    /// `erasure:before_commit:hang`.
    pub fn from_spec(spec: &str) -> Result<Faults, BadFaultSpec> {
        if spec == "erasure:before_commit:hang" {
            let faults = Faults::default();
            faults.erasure_hang.store(true, Ordering::SeqCst);
            return Ok(faults);
        }
        if let Some(rest) = spec.strip_prefix("scheduler:") {
            let (job, fault) = rest.split_once(':').ok_or(BadFaultSpec)?;
            if job.is_empty() || fault != "hang" {
                return Err(BadFaultSpec);
            }
            let faults = Faults::default();
            *faults
                .scheduler_hang
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(job.to_owned());
            return Ok(faults);
        }
        let mut parts = spec.split(':');
        let (Some("release"), Some(step), Some(fault), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(BadFaultSpec);
        };
        let step = Step::ALL
            .into_iter()
            .find(|s| s.name() == step)
            .ok_or(BadFaultSpec)?;
        let fault = match fault {
            "fail" => Fault::Fail,
            "hang" => Fault::Hang,
            _ => return Err(BadFaultSpec),
        };
        let faults = Faults::default();
        faults.arm(step, fault);
        Ok(faults)
    }

    /// Arms `step` for every release until [`Faults::disarm`].
    pub fn arm(&self, step: Step, fault: Fault) {
        *self.release.lock().unwrap_or_else(PoisonError::into_inner) = Some((step, fault));
    }

    /// Disarms.
    pub fn disarm(&self) {
        *self.release.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Stops the next release that reaches `step` until the returned handle resumes it.
    pub fn pause_release(&self, step: Step) -> Paused {
        let paused = Paused(Arc::new(Gate::default()));
        *self
            .release_pause
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((step, paused.clone()));
        paused
    }

    /// Passes unless `step` is armed.
    pub async fn check(&self, step: Step) -> Result<(), Injected> {
        if let Some(paused) = take_pause(&self.release_pause, step) {
            tracing::warn!(?step, "fault injected: this request waits here");
            paused.wait().await;
        }
        let armed = *self.release.lock().unwrap_or_else(PoisonError::into_inner);
        match armed {
            Some((s, Fault::Fail)) if s == step => Err(Injected(step)),
            Some((s, Fault::Hang)) if s == step => {
                tracing::warn!(?step, "fault injected: this request stops here");
                std::future::pending().await
            }
            _ => Ok(()),
        }
    }
}

impl Faults {
    /// Whether the first attempts of scheduled job `job` are armed to hang.
    pub fn scheduler_hangs(&self, job: &str) -> bool {
        self.scheduler_hang
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_deref()
            == Some(job)
    }
}

impl Faults {
    /// Makes the next `n` fenced writes of the outbound job (a part's record, an outcome)
    /// fail as if Postgres had dropped the connection.
    pub fn fail_dispatch_writes(&self, n: u32) {
        self.dispatch.failing_writes.store(n, Ordering::SeqCst);
    }

    /// Whether this fenced write is to fail (counting it down).
    pub fn dispatch_write_fails(&self) -> bool {
        self.dispatch
            .failing_writes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Stops the next outbound job that reaches `point` until the returned handle resumes it.
    pub fn pause_dispatch(&self, point: DispatchPoint) -> Paused {
        let paused = Paused(Arc::new(Gate::default()));
        *self
            .dispatch
            .pause
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((point, paused.clone()));
        paused
    }

    /// Where the outbound job passes `point`: waits there if a test armed it.
    pub async fn dispatch_point(&self, point: DispatchPoint) {
        if let Some(paused) = take_pause(&self.dispatch.pause, point) {
            tracing::warn!(?point, "fault injected: this outbound job waits here");
            paused.wait().await;
        }
    }
}

/// The stop armed at `at`, disarming it: only the first to arrive waits.
fn take_pause<P: PartialEq>(armed: &Mutex<Option<(P, Paused)>>, at: P) -> Option<Paused> {
    let mut armed = armed.lock().unwrap_or_else(PoisonError::into_inner);
    match armed.as_ref() {
        Some((p, _)) if *p == at => armed.take().map(|(_, paused)| paused),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_are_refused() {
        assert!(Faults::from_spec("release:after_commit:hang").is_ok());
        assert!(Faults::from_spec("release:after_outbox:fail").is_ok());
        assert!(Faults::from_spec("erasure:before_commit:hang").is_ok());
        assert!(
            Faults::from_spec("scheduler:inbox-sweeper:hang")
                .expect("parses")
                .scheduler_hangs("inbox-sweeper")
        );
        for bad in [
            "",
            "release",
            "release:after_commit",
            "release:nowhere:fail",
            "release:after_commit:explode",
            "other:after_commit:fail",
            "release:after_commit:fail:x",
            "erasure:before_commit:fail",
        ] {
            assert!(Faults::from_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dispatch_write_failures_count_down() {
        let faults = Faults::default();
        assert!(!faults.dispatch_write_fails());
        faults.fail_dispatch_writes(2);
        assert!(faults.dispatch_write_fails());
        assert!(faults.dispatch_write_fails());
        assert!(!faults.dispatch_write_fails());
    }

    #[tokio::test]
    async fn a_paused_point_holds_one_job_until_resumed() {
        let faults = Faults::default();
        let paused = faults.pause_dispatch(DispatchPoint::PartAccepted);
        let job = tokio::spawn({
            let faults = faults.clone();
            async move { faults.dispatch_point(DispatchPoint::PartAccepted).await }
        });
        paused.reached().await;
        assert!(!job.is_finished());
        paused.resume();
        job.await.expect("resumed");
        // Disarmed after the first job: the next one passes.
        faults.dispatch_point(DispatchPoint::PartAccepted).await;
    }
}
