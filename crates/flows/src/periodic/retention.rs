//! `org-retention`: for each org with a retention window (`retention_days`), deletes what is
//! older than it, table by table in batches (`switchboard_store::retention`), once per slot
//! across pods (AA2). A slot stops after [`MAX_PER_SLOT`] rows so that a first run on years
//! of data spreads over slots; what is left goes in the next. Counts per table go to
//! `retention_purged_rows_total{table}` and the run's detail; an org whose oldest message is
//! more than a day past its window raises `retention_behind`.
//!
//! The purge can be paced ([`Pace`], `RETENTION_DUTY_PERCENT`, 100 by default: back to
//! back): after each batch it waits so that its statements take at most that share of its
//! time, which lowers how many webhooks share Postgres with a batch but not what those that
//! do wait (PERFORMANCE, "Webhooks during a retention purge").

use async_trait::async_trait;
use chrono::{Duration, Utc};
use serde_json::{Map, Value, json};
use switchboard_domain::JobName;
use switchboard_jobs::alerts::{Alert, AlertKind, Alerts};
use switchboard_jobs::scheduler::{Job, JobError, Run};
use switchboard_store::retention::{self, STEPS};
use switchboard_store::{PgPool, StoreError};

/// Most rows one slot removes, across orgs and tables.
pub const MAX_PER_SLOT: u64 = 200_000;

/// The scheduled job.
pub struct OrgRetention {
    /// Postgres.
    pub db: PgPool,
    /// Where `retention_behind` goes.
    pub alerts: Alerts,
    /// How the batches are spaced.
    pub pace: Pace,
}

/// The share of its time the purge spends in its statements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Wait per unit of batch time: `100 / duty − 1`.
    rest_per_busy: f64,
}

impl Pace {
    /// The longest wait after one batch, so a slow batch does not stall the slot.
    pub const MAX_REST: std::time::Duration = std::time::Duration::from_secs(5);

    /// Statements `duty` % of the time (clamped to 1–100; the configuration refuses others).
    pub fn percent(duty: u32) -> Self {
        let duty = f64::from(duty.clamp(1, 100));
        Self {
            rest_per_busy: 100.0 / duty - 1.0,
        }
    }

    /// Back to back.
    pub fn unpaced() -> Self {
        Self::percent(100)
    }

    /// How long to wait after a batch that took `took`.
    pub fn rest_after(&self, took: std::time::Duration) -> std::time::Duration {
        took.mul_f64(self.rest_per_busy).min(Self::MAX_REST)
    }
}

/// Runs every org's purge once; rows removed per table.
pub async fn purge(db: &PgPool, budget: u64, pace: Pace) -> Result<Map<String, Value>, StoreError> {
    let mut counts = Map::new();
    let mut left = budget;
    'orgs: for window in retention::windows(db).await? {
        let cutoff = Utc::now() - Duration::days(i64::from(window.retention_days));
        for step in STEPS {
            loop {
                if left == 0 {
                    break 'orgs;
                }
                let started = std::time::Instant::now();
                let n = step.run(db, window.org_id, cutoff).await?;
                let rest = pace.rest_after(started.elapsed());
                if n > 0 && !rest.is_zero() {
                    tokio::time::sleep(rest).await;
                }
                if n > 0 {
                    metrics::counter!("retention_purged_rows_total", "table" => step.table)
                        .increment(n);
                    let total = counts.entry(step.table).or_insert(json!(0));
                    *total = json!(total.as_u64().unwrap_or(0) + n);
                }
                left = left.saturating_sub(n);
                if n < retention::BATCH as u64 {
                    break;
                }
            }
        }
    }
    Ok(counts)
}

#[async_trait]
impl Job for OrgRetention {
    fn name(&self) -> JobName {
        JobName::OrgRetention
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let counts = purge(&self.db, MAX_PER_SLOT, self.pace).await?;
        let behind = retention::behind(&self.db, 1).await?;
        for org in &behind {
            let scope = org.org_id.to_string();
            let message = format!(
                "the org still holds messages from {}, more than a day past its retention window",
                org.oldest
            );
            self.alerts
                .raise_alert(Alert {
                    kind: AlertKind::RetentionBehind,
                    scope: &scope,
                    org_id: Some(org.org_id),
                    message: &message,
                    details: json!({"org_id": org.org_id, "oldest": org.oldest}),
                })
                .await;
        }
        let still: Vec<String> = behind.iter().map(|o| o.org_id.to_string()).collect();
        self.alerts
            .resolve_all_but(AlertKind::RetentionBehind, &still)
            .await;
        Ok(json!({"purged": counts, "orgs_behind": behind.len()}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as Std;

    #[test]
    fn a_batch_is_followed_by_a_rest_that_keeps_the_purge_to_its_share() {
        let fifth = Pace::percent(20);
        assert_eq!(
            fifth.rest_after(Std::from_millis(100)),
            Std::from_millis(400)
        );
        assert_eq!(fifth.rest_after(Std::ZERO), Std::ZERO);
        assert_eq!(fifth.rest_after(Std::from_secs(10)), Pace::MAX_REST);
        assert_eq!(
            Pace::percent(50).rest_after(Std::from_millis(70)),
            Std::from_millis(70)
        );
        assert_eq!(Pace::unpaced().rest_after(Std::from_secs(3)), Std::ZERO);
        // Out of range (the configuration refuses it) is the nearest bound.
        assert_eq!(Pace::percent(0), Pace::percent(1));
        assert_eq!(Pace::percent(250), Pace::unpaced());
    }
}
