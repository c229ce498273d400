//! The pod's scheduler with every periodic job, the product's (`switchboard_flows::periodic`)
//! and the machinery's (`switchboard_jobs::periodic`) (AA2: once per slot across all pods).
//! Schedules come from the configuration (`SCHEDULE_{JOB}`); a schedule that does not
//! parse refuses the start, naming the variable.

use crate::state::AppState;
use std::sync::Arc;
use switchboard_config::{Config, SCHEDULED_JOBS};
use switchboard_domain::ReportKind;
use switchboard_flows::periodic::backlog::BacklogAlert;
use switchboard_flows::periodic::reports::ReportJob;
use switchboard_flows::periodic::retention::Pace;
use switchboard_flows::periodic::snooze::SnoozeResurface;
use switchboard_jobs::periodic::agent_health::AgentHealthProbe;
use switchboard_jobs::periodic::events_retention::EventsRetention;
use switchboard_jobs::periodic::housekeeping::{QueueUpkeep, SchedulerPrune};
use switchboard_jobs::periodic::idempotency_expiry::IdempotencyExpiry;
use switchboard_jobs::periodic::inbox_retention::InboxRetention;
use switchboard_jobs::periodic::inbox_sweeper::{InboxSweeper, SweepConfig};
use switchboard_jobs::periodic::outbox_sweeper::{OutboxSweepConfig, OutboxSweeper};
use switchboard_jobs::periodic::queue_alert::QueueAlert;
use switchboard_jobs::scheduler::schedule::Schedule;
use switchboard_jobs::scheduler::{Entry, Job, Scheduler, Settings};

/// Checks every job's schedule; one line per schedule that does not parse.
pub fn schedule_violations(config: &Config) -> Vec<String> {
    SCHEDULED_JOBS
        .iter()
        .filter_map(|job| {
            let var = format!("SCHEDULE_{}", job.to_ascii_uppercase().replace('-', "_"));
            match config.schedule(job) {
                None => Some(format!("{var} must be set")),
                Some(spec) => spec
                    .parse::<Schedule>()
                    .err()
                    .map(|e| format!("{var}: {e}")),
            }
        })
        .collect()
}

/// Every job, with its schedule.
pub fn build(state: &AppState, pod_id: &str) -> Scheduler {
    let config = &state.config;
    let db = state.db.clone();
    let flows = &state.flows;
    let alerts = state.alerts.clone();
    let jobs: Vec<Arc<dyn Job>> = vec![
        Arc::new(InboxSweeper {
            db: db.clone(),
            queue: state.inbound.clone(),
            config: SweepConfig {
                grace: config.inbox.grace,
                batch: config.inbox.sweep_batch,
            },
        }),
        Arc::new(OutboxSweeper {
            db: db.clone(),
            queue: flows.outbound.clone(),
            config: OutboxSweepConfig {
                grace: config.outbox.grace,
                batch: 500,
            },
        }),
        Arc::new(flows.dead_letters()),
        Arc::new(state.erasure()),
        Arc::new(switchboard_flows::periodic::retention::OrgRetention {
            db: db.clone(),
            alerts: alerts.clone(),
            pace: Pace::percent(config.privacy.retention_duty_percent),
        }),
        Arc::new(InboxRetention {
            db: db.clone(),
            retention: config.inbox.retention,
        }),
        Arc::new(EventsRetention {
            db: db.clone(),
            retention: config.realtime.events_retention,
        }),
        Arc::new(IdempotencyExpiry {
            db: db.clone(),
            ttl: config.http.idempotency_ttl,
        }),
        Arc::new(QueueUpkeep {
            queues: vec![state.inbound.queue_ref(), flows.outbound.queue_ref()],
        }),
        Arc::new(SchedulerPrune {
            db: db.clone(),
            jobs: SCHEDULED_JOBS.to_vec(),
            keep: config.scheduler.history,
            keep_runs: config.scheduler.history_runs,
        }),
        Arc::new(switchboard_flows::autopilot::AutopilotSend {
            deps: flows.clone(),
        }),
        Arc::new(SnoozeResurface {
            db: db.clone(),
            emitter: flows.emitter.clone(),
        }),
        Arc::new(BacklogAlert {
            db: db.clone(),
            alerts: alerts.clone(),
        }),
        Arc::new(AgentHealthProbe {
            agent: flows.agent.clone(),
            redis: state.redis.clone(),
            alerts: alerts.clone(),
            timeout: config.agent.health_timeout,
        }),
        Arc::new(QueueAlert {
            db: db.clone(),
            redis: state.redis.clone(),
            alerts: alerts.clone(),
            waiting_threshold: config.alerts.queue_waiting,
            failed_threshold: config.alerts.queue_failed,
            inbound: state.inbound.queue_ref(),
        }),
        Arc::new(ReportJob {
            db: db.clone(),
            emitter: flows.emitter.clone(),
            kind: ReportKind::DailySummary,
        }),
        Arc::new(ReportJob {
            db: db.clone(),
            emitter: flows.emitter.clone(),
            kind: ReportKind::WeeklyReport,
        }),
        Arc::new(ReportJob {
            db: db.clone(),
            emitter: flows.emitter.clone(),
            kind: ReportKind::ReviewSummary,
        }),
    ];
    let entries = jobs
        .into_iter()
        .filter_map(|job| {
            let name = job.name().as_str();
            // Checked at start-up (`schedule_violations`).
            let schedule = config.schedule(name)?.parse::<Schedule>().ok()?;
            Some(Entry {
                catch_up: config.catches_up(name),
                job,
                schedule,
            })
        })
        .collect();
    Scheduler::new(
        db,
        Settings {
            pod_id: pod_id.to_owned(),
            lease: config.scheduler.lease,
        },
        alerts,
        flows.faults.clone(),
        entries,
    )
}
