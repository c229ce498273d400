//! `daily-summary`, `weekly-report` and `review-summary`: per org, in the org's time zone
//! (the job's cron is read in each org's zone, so "08:00" is each org's 08:00), a report row
//! (one per org, kind and period: a retried slot stores nothing twice) and a `report_ready`
//! event in the same transaction.
//!
//! A daily summary covers the org's previous local day, a weekly report the seven local days
//! before the slot's date, a review summary is a snapshot of the items flagged for review.

use async_trait::async_trait;
use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};
use std::sync::Arc;
use switchboard_domain::events::ReportReady;
use switchboard_domain::{Emitter, Event, JobName, ReportKind};
use switchboard_jobs::scheduler::{Job, JobError, Run};
use switchboard_store::reports::{self, NewReport};
use switchboard_store::{PgPool, StoreError, event_outbox};

/// The scheduled job for one kind of report.
pub struct ReportJob {
    /// Postgres.
    pub db: PgPool,
    /// The realtime relay, woken after each stored report.
    pub emitter: Arc<dyn Emitter>,
    /// Which report.
    pub kind: ReportKind,
}

fn local_midnight(tz: Tz, date: NaiveDate) -> DateTime<Utc> {
    let naive = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    tz.from_local_datetime(&naive)
        .earliest()
        .map_or_else(|| naive.and_utc(), |t| t.with_timezone(&Utc))
}

/// The period a report of `kind` for slot `slot` covers in zone `tz`.
pub fn period(kind: ReportKind, slot: DateTime<Utc>, tz: Tz) -> (DateTime<Utc>, DateTime<Utc>) {
    let today = slot.with_timezone(&tz).date_naive();
    let back = match kind {
        ReportKind::DailySummary => 1,
        ReportKind::WeeklyReport => 7,
        ReportKind::ReviewSummary => return (slot, slot),
    };
    let start = today.checked_sub_days(Days::new(back)).unwrap_or(today);
    (local_midnight(tz, start), local_midnight(tz, today))
}

#[async_trait]
impl Job for ReportJob {
    fn name(&self) -> JobName {
        match self.kind {
            ReportKind::DailySummary => JobName::DailySummary,
            ReportKind::WeeklyReport => JobName::WeeklyReport,
            ReportKind::ReviewSummary => JobName::ReviewSummary,
        }
    }

    fn per_org_zone(&self) -> bool {
        true
    }

    async fn run(&self, run: &Run) -> Result<Value, JobError> {
        let zones: Vec<String> = run.zones.iter().map(|z| z.name().to_owned()).collect();
        let orgs = reports::orgs_in_zones(&self.db, &zones).await?;
        let mut stored = 0;
        for (org_id, zone) in &orgs {
            let Ok(tz) = zone.parse::<Tz>() else { continue };
            let (start, end) = period(self.kind, run.slot, tz);
            let data = match self.kind {
                ReportKind::ReviewSummary => reports::flagged_for_review(&self.db, *org_id).await?,
                _ => reports::activity(&self.db, *org_id, start, end).await?,
            };
            let mut tx = self.db.begin().await.map_err(StoreError::from)?;
            let new = NewReport {
                org_id: *org_id,
                kind: self.kind,
                period_start: start,
                period_end: end,
                time_zone: zone,
                data,
            };
            if let Some(report) = reports::insert(&mut tx, &new).await? {
                let ready = Event::ReportReady(ReportReady {
                    report_id: report.id,
                    kind: report.kind,
                    period_start: report.period_start,
                    period_end: report.period_end,
                });
                event_outbox::enqueue(&mut *tx, *org_id, &[ready]).await?;
                stored += 1;
            }
            tx.commit().await.map_err(StoreError::from)?;
        }
        if stored > 0 {
            self.emitter.wake();
            tracing::info!(kind = self.kind.as_str(), stored, "reports stored");
        }
        Ok(json!({"zones": zones, "orgs": orgs.len(), "stored": stored}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_follow_the_org_zone() {
        // 08:00 in Tokyo on 2 March is 23:00 UTC on 1 March.
        let slot = Utc
            .with_ymd_and_hms(2026, 3, 1, 23, 0, 0)
            .single()
            .expect("t");
        let (start, end) = period(ReportKind::DailySummary, slot, Tz::Asia__Tokyo);
        assert_eq!(
            start,
            Utc.with_ymd_and_hms(2026, 2, 28, 15, 0, 0)
                .single()
                .expect("t")
        );
        assert_eq!(
            end,
            Utc.with_ymd_and_hms(2026, 3, 1, 15, 0, 0)
                .single()
                .expect("t")
        );
        let (start, _) = period(ReportKind::WeeklyReport, slot, Tz::UTC);
        assert_eq!(
            start,
            Utc.with_ymd_and_hms(2026, 2, 22, 0, 0, 0)
                .single()
                .expect("t")
        );
    }
}
