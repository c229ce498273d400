//! The outbox row's lease as one run of the job holds it, and the fenced writes made under
//! it.
//!
//! Every write after the claim names the claim's `lease_id`, so it matches no row once
//! another worker has taken the row over. The job tells two failures of such a write apart:
//! - it matched no row: the lease is lost, and the row's new holder sends whatever is not
//!   recorded. This run stops at once, before any further part, or the customer would get
//!   the rest of the reply twice;
//! - it failed (Postgres away, a dropped connection): the lease is very likely still ours,
//!   and giving up on a part's record means its next holder sends the part again. The write
//!   is tried again with backoff as long as the lease lasts by this pod's clock, and only
//!   then given up (the row is then left to the sweeper, and the part's record is the one
//!   window "Exactly once in effect" in docs/ARCHITECTURE.md describes).

use super::DispatchError;
use crate::Deps;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchboard_domain::backoff::Backoff;
use switchboard_store::StoreError;
use switchboard_store::outbox::{self, Claimed};
use tokio::time::Instant;

/// Waits before a failed fenced write is tried again: from 50 ms, doubled (with jitter) each
/// time, at most 1 s.
const WRITE_RETRY: Backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));

/// The lease of one claimed row.
#[derive(Debug)]
pub(super) struct Lease {
    outbox_id: uuid::Uuid,
    lease_id: uuid::Uuid,
    length: Duration,
    /// When the lease runs out at the latest, as this pod knows it: when the statement that
    /// last set it was sent, plus its length (Postgres' own clock set it a little later).
    until: Mutex<Instant>,
    /// A write or a renewal found the row held by another claim.
    lost: AtomicBool,
}

impl Lease {
    /// The lease of `row`, claimed by a statement sent at `claimed_at` for `length`.
    pub(super) fn new(row: &Claimed, length: Duration, claimed_at: Instant) -> Self {
        Self {
            outbox_id: row.id,
            lease_id: row.lease_id,
            length,
            until: Mutex::new(claimed_at + length),
            lost: AtomicBool::new(false),
        }
    }

    /// Whether this run may still act on the row (send a part): the lease was not taken
    /// over and has not run out. A lease that ran out because Postgres could not renew it
    /// may be another worker's by now, so it counts as lost for sending.
    pub(super) fn held(&self) -> bool {
        !self.lost.load(Ordering::SeqCst) && self.until() > Instant::now()
    }

    fn until(&self) -> Instant {
        *self
            .until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn extend(&self, sent_at: Instant) {
        let mut until = self
            .until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *until = (*until).max(sent_at + self.length);
    }

    fn lose(&self) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            tracing::warn!(outbox_id = %self.outbox_id, "outbox lease was taken over; this run stops");
        }
    }

    /// Runs `work` while renewing the lease every third of its length.
    pub(super) async fn hold<T>(&self, deps: &Deps, work: impl Future<Output = T>) -> T {
        let renew = || async move {
            let sent_at = Instant::now();
            match outbox::renew(&deps.db, self.outbox_id, self.lease_id, self.length).await {
                Ok(true) => self.extend(sent_at),
                Ok(false) => self.lose(),
                Err(e) => {
                    tracing::warn!(outbox_id = %self.outbox_id, error = %e, "could not renew the outbox lease")
                }
            }
        };
        switchboard_domain::lease::hold(self.length, renew, work).await
    }

    /// Runs the fenced write `write` (`None`: it matched no row). A failed write is tried
    /// again with backoff while the lease lasts, and for no longer than one lease from the
    /// first failure (renewals may keep extending it); then its last error is returned. A
    /// write that matched no row marks the lease lost and returns `None`.
    ///
    /// A retry after an error that hid a commit finds its own write done: the part record
    /// matches it (see `outbox::record_part`); an outcome, which releases the lease, then
    /// reads as a lost lease, so the run stops and the row's state is already right.
    pub(super) async fn write<T, F, Fut>(
        &self,
        deps: &Deps,
        what: &'static str,
        mut write: F,
    ) -> Result<Option<T>, DispatchError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, StoreError>>,
    {
        let mut failed_at = None;
        let mut tries = 0;
        loop {
            tries += 1;
            let result = if deps.faults.dispatch_write_fails() {
                Err(injected())
            } else {
                write().await
            };
            let error = match result {
                Ok(Some(done)) => {
                    if tries > 1 {
                        tracing::info!(outbox_id = %self.outbox_id, what, tries, "fenced write recorded after retrying");
                    }
                    return Ok(Some(done));
                }
                Ok(None) => {
                    self.lose();
                    return Ok(None);
                }
                // The same data would be refused again.
                Err(e) if e.is_row_error() => return Err(e.into()),
                Err(e) => e,
            };
            let now = Instant::now();
            let deadline = self
                .until()
                .min(*failed_at.get_or_insert(now) + self.length);
            let wait = WRITE_RETRY.delay(tries);
            if now + wait >= deadline || self.lost.load(Ordering::SeqCst) {
                metrics::counter!("outbound_fenced_write_failures_total", "outcome" => "given_up")
                    .increment(1);
                tracing::warn!(outbox_id = %self.outbox_id, what, tries, error = %error,
                    "a fenced outbox write kept failing until the lease ran out; giving up");
                return Err(error.into());
            }
            metrics::counter!("outbound_fenced_write_failures_total", "outcome" => "retried")
                .increment(1);
            tracing::warn!(outbox_id = %self.outbox_id, what, tries, error = %error,
                wait_ms = wait.as_millis() as u64, "a fenced outbox write failed; trying again");
            tokio::time::sleep(wait).await;
        }
    }
}

/// What an injected write failure looks like: a connection Postgres dropped.
fn injected() -> StoreError {
    StoreError::Sqlx(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "fault injected: fenced write failed",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchboard_domain::ChannelKind;
    use uuid::Uuid;

    fn lease(length: Duration, claimed_at: Instant) -> Lease {
        let row = Claimed {
            id: Uuid::new_v4(),
            org_id: Uuid::new_v4(),
            conversation_id: Uuid::new_v4(),
            message_id: Uuid::new_v4(),
            connection_id: Uuid::new_v4(),
            channel: ChannelKind::Slack,
            payload: json!({}),
            parts: json!([]),
            attempts: 0,
            lease_id: Uuid::new_v4(),
            traceparent: None,
            answers_traceparent: None,
        };
        Lease::new(&row, length, claimed_at)
    }

    #[test]
    fn a_lease_is_held_until_it_runs_out_or_is_lost() {
        let length = Duration::from_secs(3);
        assert!(lease(length, Instant::now()).held());
        let old = lease(length, Instant::now() - Duration::from_secs(4));
        assert!(!old.held(), "run out without a renewal");
        old.extend(Instant::now() - Duration::from_secs(5));
        assert!(!old.held(), "an older renewal never moves the end back");
        old.extend(Instant::now());
        assert!(old.held(), "a renewal moves the end");
        old.lose();
        assert!(!old.held(), "lost for good");
        old.extend(Instant::now());
        assert!(!old.held(), "a lost lease stays lost");
    }
}
