//! `org-retention`: for each org with a retention window (`retention_days`), deletes what is
//! older than it, table by table in batches (`switchboard_store::retention`), once per slot
//! across pods (AA2). A slot stops after [`MAX_PER_SLOT`] rows so that a first run on years
//! of data spreads over slots; what is left goes in the next. Counts per table go to
//! `retention_purged_rows_total{table}` and the run's detail; an org whose oldest message is
//! more than a day past its window raises `retention_behind`.

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
}

/// Runs every org's purge once; rows removed per table.
pub async fn purge(db: &PgPool, budget: u64) -> Result<Map<String, Value>, StoreError> {
    let mut counts = Map::new();
    let mut left = budget;
    'orgs: for window in retention::windows(db).await? {
        let cutoff = Utc::now() - Duration::days(i64::from(window.retention_days));
        for step in STEPS {
            loop {
                if left == 0 {
                    break 'orgs;
                }
                let n = step.run(db, window.org_id, cutoff).await?;
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
        let counts = purge(&self.db, MAX_PER_SLOT).await?;
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
