//! One scheduler for every periodic job, the same on every pod, each slot run exactly once
//! across all pods (AA2).
//!
//! For each due slot every pod races for the `(job, slot)` row in `cron_runs` with one
//! `INSERT … ON CONFLICT DO NOTHING`; only the winner runs it, holding a lease it renews
//! every third of `SCHEDULER_LEASE_MS` and recording start, finish, outcome and pod. If the
//! winner dies mid-run (crash, OOM, `kill -9`) the row stays `running` and its lease lapses:
//! another pod's reaper takes the slot over with one atomic `UPDATE … RETURNING` and runs it
//! again, once (`attempt` 2); a retry that dies too is `abandoned`. Both raise an alert. So
//! jobs must be idempotent, which they are (sweeps, retention, `ON CONFLICT` reports).
//!
//! At start-up each job runs its latest slot if nobody did (`SCHEDULER_SKIP_MISSED` opts a
//! job out), so an outage of every pod costs one late run rather than a missing one. A pod
//! runs one slot of a job at a time; a slot that comes while it is busy is left to the
//! other pods, and when it is done it tries the latest slot it has not tried (never an older
//! one: a sweep or a report covers everything up to now anyway).
//!
//! Jobs read in the orgs' time zones (reports) have a slot wherever an org's zone has an
//! occurrence of the cron expression; each run handles the orgs of the zones its slot is in.

pub mod schedule;

use crate::alerts::{AlertKind, Alerts};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use futures::FutureExt;
use schedule::Schedule;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchboard_domain::faults::Faults;
use switchboard_domain::{JobName, lease, periodic};
use switchboard_store::cron_runs::{self, Held, Outcome};
use switchboard_store::{PgPool, StoreError, reports};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Redis.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// Redis coordination.
    #[error(transparent)]
    Coord(#[from] switchboard_coord::CoordError),
    /// A queue push.
    #[error(transparent)]
    Push(#[from] crate::queue::PushError),
    /// Anything else, with its source.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// One run of a job.
#[derive(Debug, Clone)]
pub struct Run {
    /// The slot (the scheduled instant).
    pub slot: DateTime<Utc>,
    /// 1, or 2 for the retry of a run whose pod died.
    pub attempt: i16,
    /// For jobs read in the orgs' zones: the zones this slot is an occurrence in.
    pub zones: Vec<Tz>,
}

/// A periodic job. Runs must be idempotent: a slot may run twice when its first pod died.
#[async_trait]
pub trait Job: Send + Sync {
    /// The `cron_runs.job` name.
    fn name(&self) -> JobName;
    /// Whether the schedule is read in each org's time zone.
    fn per_org_zone(&self) -> bool {
        false
    }
    /// Does the work; the value is stored as the run's `detail`.
    async fn run(&self, run: &Run) -> Result<Value, JobError>;
}

/// A job with its schedule.
pub struct Entry {
    /// The job.
    pub job: Arc<dyn Job>,
    /// When it runs.
    pub schedule: Schedule,
    /// Whether its latest missed slot runs at start-up.
    pub catch_up: bool,
}

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// This pod's name in `cron_runs.pod_id`.
    pub pod_id: String,
    /// How long a run holds its slot without renewing it.
    pub lease: Duration,
}

struct Inner {
    db: PgPool,
    settings: Settings,
    alerts: Alerts,
    faults: Faults,
    entries: Vec<Arc<Entry>>,
    /// Per job: whether this pod is running one of its slots now (pod-local by nature).
    busy: HashMap<&'static str, Arc<AtomicBool>>,
}

/// The pod's scheduler.
#[derive(Clone)]
pub struct Scheduler(Arc<Inner>);

/// Most time a job loop sleeps before looking again (catches clock jumps, new org zones).
const MAX_SLEEP: Duration = Duration::from_secs(30);

impl Scheduler {
    /// A scheduler for `entries`.
    pub fn new(
        db: PgPool,
        settings: Settings,
        alerts: Alerts,
        faults: Faults,
        entries: Vec<Entry>,
    ) -> Self {
        let busy = entries
            .iter()
            .map(|e| (e.job.name().as_str(), Arc::new(AtomicBool::new(false))))
            .collect();
        Self(Arc::new(Inner {
            db,
            settings,
            alerts,
            faults,
            entries: entries.into_iter().map(Arc::new).collect(),
            busy,
        }))
    }

    /// The job names.
    pub fn jobs(&self) -> Vec<&'static str> {
        self.0
            .entries
            .iter()
            .map(|e| e.job.name().as_str())
            .collect()
    }

    /// Starts one loop per job and the reaper on `tracker` until `token` is cancelled.
    pub fn spawn(&self, token: CancellationToken, tracker: &TaskTracker) {
        for entry in &self.0.entries {
            let this = self.clone();
            let entry = entry.clone();
            let token = token.clone();
            tracker.spawn(async move { this.job_loop(entry, token).await });
        }
        let this = self.clone();
        let runs = tracker.clone();
        let every =
            (self.0.settings.lease / 4).clamp(Duration::from_millis(200), Duration::from_secs(5));
        periodic::every("scheduler reaper", every, &token, tracker, move || {
            let (this, runs) = (this.clone(), runs.clone());
            async move {
                this.reap(&runs).await;
                Ok::<(), Infallible>(())
            }
        });
    }

    async fn zones(&self, entry: &Entry) -> Vec<Tz> {
        if !entry.job.per_org_zone() {
            return schedule::utc();
        }
        match reports::org_time_zones(&self.0.db).await {
            Ok(names) => names.iter().filter_map(|n| n.parse::<Tz>().ok()).collect(),
            Err(e) => {
                tracing::warn!(job = entry.job.name().as_str(), error = %e, "could not read org time zones");
                Vec::new()
            }
        }
    }

    async fn job_loop(&self, entry: Arc<Entry>, token: CancellationToken) {
        let name = entry.job.name().as_str();
        let mut last: Option<DateTime<Utc>> = None;
        let mut first = true;
        loop {
            if token.is_cancelled() {
                break;
            }
            let zones = self.zones(&entry).await;
            let now = Utc::now();
            let latest = entry.schedule.latest(now, &zones);
            if let Some(slot) = latest.filter(|s| Some(*s) > last) {
                last = Some(slot);
                // At start-up the latest slot may be long past: run it only if the job
                // catches up (and nobody ran it: the claim says).
                if !first || entry.catch_up {
                    self.attempt(&entry, slot, &zones).await;
                }
                first = false;
                continue;
            }
            first = false;
            let wait = entry
                .schedule
                .next(last.unwrap_or(now).max(now), &zones)
                .and_then(|next| (next - Utc::now()).to_std().ok())
                .map_or(MAX_SLEEP, |d| d.min(MAX_SLEEP));
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep(wait + Duration::from_millis(1)) => {}
            }
        }
        tracing::debug!(job = name, "scheduler loop stopped");
    }

    fn busy(&self, job: &str) -> Option<&Arc<AtomicBool>> {
        self.0.busy.get(job)
    }

    async fn attempt(&self, entry: &Arc<Entry>, slot: DateTime<Utc>, zones: &[Tz]) {
        let name = entry.job.name().as_str();
        let s = &self.0.settings;
        match cron_runs::claim(&self.0.db, name, slot, &s.pod_id, s.lease).await {
            Ok(true) => {
                let held = Held {
                    job: name.to_owned(),
                    slot,
                    attempt: 1,
                    previous_pod: None,
                };
                let zones = entry.schedule.zones_of(slot, zones);
                self.execute(entry, held, zones).await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(job = name, error = %e, "could not claim a scheduled slot"),
        }
    }

    /// Runs a held slot: renews its lease while the job works, then records the outcome.
    async fn execute(&self, entry: &Arc<Entry>, held: Held, zones: Vec<Tz>) {
        let name = entry.job.name().as_str();
        let busy = self.busy(name).cloned();
        if let Some(b) = &busy {
            b.store(true, Ordering::SeqCst);
        }
        let run = Run {
            slot: held.slot,
            attempt: held.attempt,
            zones,
        };
        let s = &self.0.settings;
        let renew = || async {
            match cron_runs::renew(&self.0.db, &held, &s.pod_id, s.lease).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(job = name, "scheduled run lost its slot"),
                Err(e) => tracing::warn!(job = name, error = %e, "could not renew a run's lease"),
            }
        };
        let hang = held.attempt == 1 && self.0.faults.scheduler_hangs(name);
        let work = async {
            if hang {
                tracing::warn!(job = name, "fault injected: this scheduled run stops here");
                std::future::pending::<()>().await;
            }
            AssertUnwindSafe(entry.job.run(&run)).catch_unwind().await
        };
        let result = lease::hold(s.lease, renew, work).await;
        let (outcome, detail) = match result {
            Ok(Ok(detail)) => (Outcome::Ok, detail),
            Ok(Err(e)) => (Outcome::Failed, json!({"error": e.to_string()})),
            Err(_) => (Outcome::Failed, json!({"error": "the job panicked"})),
        };
        match cron_runs::finish(&self.0.db, &held, &s.pod_id, outcome, &detail).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(job = name, "scheduled run finished after losing its slot"),
            Err(e) => tracing::warn!(job = name, error = %e, "could not record a scheduled run"),
        }
        metrics::counter!("scheduled_runs_total", "job" => name, "outcome" => outcome.as_str())
            .increment(1);
        if outcome == Outcome::Ok {
            // A success clears what the job's earlier failures and retries opened.
            self.0
                .alerts
                .resolve(AlertKind::ScheduledRunFailed, name)
                .await;
            self.0
                .alerts
                .resolve(AlertKind::ScheduledRunRetried, name)
                .await;
        } else {
            self.0
                .alerts
                .raise(
                    AlertKind::ScheduledRunFailed,
                    name,
                    "scheduled run failed",
                    json!({"job": name, "slot": held.slot, "attempt": held.attempt, "detail": detail}),
                )
                .await;
        }
        if let Some(b) = busy {
            b.store(false, Ordering::SeqCst);
        }
    }

    /// Retries the runs of pods that died (once, on `tracker`), and gives up on retries that
    /// died too.
    async fn reap(&self, tracker: &TaskTracker) {
        let names = self.jobs();
        match cron_runs::abandon_expired(&self.0.db, &names).await {
            Ok(gone) => {
                for held in gone {
                    let job = self.job_name(&held.job);
                    metrics::counter!("scheduled_runs_total", "job" => job, "outcome" => "abandoned")
                        .increment(1);
                    self.0
                        .alerts
                        .raise(
                            AlertKind::ScheduledRunFailed,
                            job,
                            "scheduled run abandoned: its retry's pod died too",
                            json!({"job": job, "slot": held.slot}),
                        )
                        .await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not look for abandoned runs"),
        }
        loop {
            let idle: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| self.busy(n).is_none_or(|b| !b.load(Ordering::SeqCst)))
                .collect();
            if idle.is_empty() {
                break;
            }
            let s = &self.0.settings;
            let held =
                match cron_runs::take_over_expired(&self.0.db, &idle, &s.pod_id, s.lease).await {
                    Ok(Some(held)) => held,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not look for runs of dead pods");
                        break;
                    }
                };
            let Some(entry) = self
                .0
                .entries
                .iter()
                .find(|e| e.job.name().as_str() == held.job)
            else {
                break;
            };
            let job = entry.job.name().as_str();
            metrics::counter!("scheduled_runs_total", "job" => job, "outcome" => "retried")
                .increment(1);
            tracing::warn!(job, slot = %held.slot, previous_pod = ?held.previous_pod, "retrying a scheduled run whose pod died");
            self.0
                .alerts
                .raise(
                    AlertKind::ScheduledRunRetried,
                    job,
                    "scheduled run retried: its pod died mid-run",
                    json!({"job": job, "slot": held.slot, "previous_pod": held.previous_pod}),
                )
                .await;
            if let Some(b) = self.busy(job) {
                b.store(true, Ordering::SeqCst);
            }
            let this = self.clone();
            let entry = entry.clone();
            tracker.spawn(async move {
                let zones = this.zones(&entry).await;
                let zones = entry.schedule.zones_of(held.slot, &zones);
                this.execute(&entry, held, zones).await;
            });
        }
    }

    fn job_name(&self, job: &str) -> &'static str {
        self.0
            .entries
            .iter()
            .map(|e| e.job.name().as_str())
            .find(|n| *n == job)
            .unwrap_or("unknown")
    }
}
