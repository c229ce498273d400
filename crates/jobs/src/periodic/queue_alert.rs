//! `queue-alert`: opens `queue_backlog` while more inbound events wait in the Postgres inbox
//! than `ALERT_QUEUE_WAITING`, or more events failed processing or delivery in the last
//! 5 minutes than `ALERT_QUEUE_FAILED`, and resolves it once both are below. It opens early
//! too, below the threshold, when the backlog grows fast enough to pass it within
//! [`FORESIGHT`]: its growth is the inbound queue's depth against the depth the previous run
//! (on any pod) left in Redis.
//!
//! Failures are counted as they happen, across pods, in per-minute Redis counters under
//! one hash tag (so the five are read with one `MGET` on a cluster too): an inbound job
//! whose failure was recorded, and an outbound round that failed for good.

use crate::alerts::{AlertKind, Alerts};
use crate::queue::{QueueRef, upkeep};
use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_coord::Redis;
use switchboard_domain::JobName;
use switchboard_store::{PgPool, inbox};

/// The window failures are counted over.
pub const WINDOW_MINUTES: i64 = 5;
/// How long a minute's counter is kept (past the window, for clock skew between pods).
const KEEP: Duration = Duration::from_secs(15 * 60);
/// How far ahead a growing backlog is projected: one that would pass the threshold within
/// this long opens the incident now.
pub const FORESIGHT: Duration = Duration::from_secs(60);
/// How long the last run's depth is kept for the next one.
const DEPTH_KEEP_SECS: u64 = 600;

/// How long counting a failure may hold up the job that failed.
const COUNT_TIMEOUT: Duration = Duration::from_millis(200);

fn minute_key(redis: &Redis, minute: i64) -> String {
    format!("{}:failures:{minute}", redis.tagged("queue-alert"))
}

fn this_minute() -> i64 {
    chrono::Utc::now().timestamp().div_euclid(60)
}

/// Counts one failed event. Best effort: a lost count only delays the alert.
pub async fn count_failure(redis: &Redis) {
    let key = minute_key(redis, this_minute());
    let mut pipe = redis::pipe();
    pipe.incr(&key, 1)
        .ignore()
        .expire(&key, KEEP.as_secs().try_into().unwrap_or(i64::MAX))
        .ignore();
    let mut conn = redis.conn();
    let counted = tokio::time::timeout(COUNT_TIMEOUT, pipe.query_async::<()>(&mut conn)).await;
    if !matches!(counted, Ok(Ok(()))) {
        tracing::debug!("could not count a failure for the queue alert");
    }
}

/// Failures counted in the last [`WINDOW_MINUTES`] minutes (this one included).
pub async fn recent_failures(redis: &Redis) -> Result<i64, redis::RedisError> {
    let now = this_minute();
    let keys: Vec<String> = (0..WINDOW_MINUTES)
        .map(|back| minute_key(redis, now - back))
        .collect();
    let counts: Vec<Option<i64>> = redis::cmd("MGET")
        .arg(&keys)
        .query_async(&mut redis.conn())
        .await?;
    Ok(counts.into_iter().flatten().sum())
}

/// The scheduled job.
pub struct QueueAlert {
    /// Postgres (the inbox).
    pub db: PgPool,
    /// Redis (the failure counters).
    pub redis: Redis,
    /// Where the alert goes.
    pub alerts: Alerts,
    /// `ALERT_QUEUE_WAITING`.
    pub waiting_threshold: i64,
    /// `ALERT_QUEUE_FAILED`.
    pub failed_threshold: i64,
    /// The inbound queue, whose depth between two runs is the backlog's growth.
    pub inbound: QueueRef,
}

impl QueueAlert {
    /// Waiting inbound jobs gained per second since the previous run, which this run's
    /// depth replaces; `None` on the first run, within a second of the last one, or when
    /// Redis cannot tell.
    async fn growth(&self) -> Option<f64> {
        let depth = upkeep::depth(&self.inbound).await.ok()?.total();
        let now_ms = chrono::Utc::now().timestamp_millis();
        let key = format!("{}:depth", self.redis.tagged("queue-alert"));
        let previous: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(format!("{depth}:{now_ms}"))
            .arg("GET")
            .arg("EX")
            .arg(DEPTH_KEEP_SECS)
            .query_async(&mut self.redis.conn())
            .await
            .ok()?;
        let (before, at) = previous?
            .split_once(':')
            .and_then(|(d, at)| Some((d.parse::<f64>().ok()?, at.parse::<i64>().ok()?)))?;
        let secs = (now_ms - at) as f64 / 1000.0;
        (secs >= 1.0).then(|| (depth as f64 - before) / secs)
    }
}

#[async_trait]
impl Job for QueueAlert {
    fn name(&self) -> JobName {
        JobName::QueueAlert
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let waiting = inbox::waiting(&self.db, self.waiting_threshold + 1).await?;
        let failed = recent_failures(&self.redis).await?;
        let growth = self.growth().await;
        let per_second = growth.unwrap_or(0.0).round() as i64;
        metrics::gauge!("inbound_backlog_growth_per_second").set(growth.unwrap_or(0.0));
        // Growing fast enough to pass the threshold within the foresight.
        let soon = per_second > 0
            && waiting + per_second * FORESIGHT.as_secs() as i64 > self.waiting_threshold;
        let over = waiting > self.waiting_threshold || failed > self.failed_threshold || soon;
        let figures = json!({
            "waiting": waiting,
            "waiting_threshold": self.waiting_threshold,
            "growth_per_second": per_second,
            "failed_last_5_minutes": failed,
            "failed_threshold": self.failed_threshold,
        });
        if over {
            let waiting_text = if waiting > self.waiting_threshold {
                format!("more than {} events", self.waiting_threshold)
            } else {
                format!("{waiting} events")
            };
            let growing = if per_second > 0 {
                format!(", growing by {per_second} a second,")
            } else {
                String::new()
            };
            let message = format!(
                "{waiting_text} wait in the inbox{growing} and {failed} failed in the last {WINDOW_MINUTES} minutes"
            );
            self.alerts
                .raise(
                    AlertKind::QueueBacklog,
                    "channel-inbound",
                    &message,
                    figures.clone(),
                )
                .await;
        } else {
            self.alerts
                .resolve(AlertKind::QueueBacklog, "channel-inbound")
                .await;
        }
        Ok(figures)
    }
}
