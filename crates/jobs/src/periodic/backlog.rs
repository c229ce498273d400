//! `backlog-alert`: pending items past their `sla_due_at` → one alert per org with the
//! count and the oldest item (de-duplicated across pods for the alert window).

use crate::alerts::{AlertKind, Alerts};
use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_domain::JobName;
use switchboard_store::{PgPool, expert_queue};

/// The scheduled job.
pub struct BacklogAlert {
    /// Postgres.
    pub db: PgPool,
    /// Where the alerts go.
    pub alerts: Alerts,
}

#[async_trait]
impl Job for BacklogAlert {
    fn name(&self) -> JobName {
        JobName::BacklogAlert
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let backlog = expert_queue::backlog_past_sla(&self.db).await?;
        let mut alerted = 0;
        for org in &backlog {
            let raised = self
                .alerts
                .raise(
                    AlertKind::BacklogPastSla,
                    &org.org_id.to_string(),
                    &format!(
                        "{} pending items are past their SLA; the oldest was due at {}",
                        org.overdue, org.oldest_due_at
                    ),
                    json!({
                        "org_id": org.org_id,
                        "overdue": org.overdue,
                        "oldest_id": org.oldest_id,
                        "oldest_due_at": org.oldest_due_at,
                    }),
                )
                .await;
            alerted += usize::from(raised);
        }
        Ok(json!({"orgs_past_sla": backlog.len(), "alerted": alerted}))
    }
}
