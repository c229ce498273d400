//! Fault injection for the tests of the release transaction: a test arms a step, and the
//! next release fails there (everything before it must roll back) or stops there for ever
//! (as if the pod died at that instant, so a test can kill it at exactly that point).
//!
//! A pod is armed only in-process by a test, or at start-up from `FAULT_INJECT` with
//! `APP_ENV=test`; production refuses to start with `FAULT_INJECT` set. Unarmed, a check is
//! one uncontended lock.

use std::sync::{Arc, Mutex, PoisonError};

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

/// Why `FAULT_INJECT` could not be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "FAULT_INJECT must be release:<step>:fail|hang, with step one of after_transition, after_outbox, after_events, after_commit, or scheduler:<job>:hang"
)]
pub struct BadFaultSpec;

/// The pod's armed faults, if any.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    release: Arc<Mutex<Option<(Step, Fault)>>>,
    /// A scheduled job whose first attempt of every slot stops for ever (its lease still
    /// renewed), as a run that is killed mid-way.
    scheduler_hang: Arc<Mutex<Option<String>>>,
}

impl Faults {
    /// Parses `release:<step>:fail|hang` or `scheduler:<job>:hang`.
    pub fn from_spec(spec: &str) -> Result<Faults, BadFaultSpec> {
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

    /// Passes unless `step` is armed.
    pub async fn check(&self, step: Step) -> Result<(), Injected> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_are_refused() {
        assert!(Faults::from_spec("release:after_commit:hang").is_ok());
        assert!(Faults::from_spec("release:after_outbox:fail").is_ok());
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
        ] {
            assert!(Faults::from_spec(bad).is_err(), "{bad}");
        }
    }
}
