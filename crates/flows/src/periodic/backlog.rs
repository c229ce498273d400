//! `backlog-alert`: pending items past their `sla_due_at` → one open `backlog_past_sla`
//! incident per org with the count and the oldest item; an org with none overdue any more
//! has its incident resolved.

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_domain::JobName;
use switchboard_jobs::alerts::{Alert, AlertKind, Alerts};
use switchboard_jobs::scheduler::{Job, JobError, Run};
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
            let scope = org.org_id.to_string();
            let message = format!(
                "{} pending items are past their SLA; the oldest was due at {}",
                org.overdue, org.oldest_due_at
            );
            let raised = self
                .alerts
                .raise_alert(Alert {
                    kind: AlertKind::BacklogPastSla,
                    scope: &scope,
                    org_id: Some(org.org_id),
                    message: &message,
                    details: json!({
                        "org_id": org.org_id,
                        "overdue": org.overdue,
                        "oldest_id": org.oldest_id,
                        "oldest_due_at": org.oldest_due_at,
                    }),
                })
                .await;
            alerted += usize::from(raised);
        }
        let still: Vec<String> = backlog.iter().map(|o| o.org_id.to_string()).collect();
        self.alerts
            .resolve_all_but(AlertKind::BacklogPastSla, &still)
            .await;
        Ok(json!({"orgs_past_sla": backlog.len(), "alerted": alerted}))
    }
}
