//! `queue-alert`: opens `queue_backlog` while more inbound events wait in the Postgres inbox
//! than `ALERT_QUEUE_WAITING`, or more events failed processing or delivery in the last
//! 5 minutes than `ALERT_QUEUE_FAILED`, and resolves it once both are below.
//!
//! Failures are counted as they happen, across pods, in per-minute Redis counters under
//! one hash tag (so the five are read with one `MGET` on a cluster too): an inbound job
//! whose failure was recorded, and an outbound round that failed for good.

use crate::alerts::{AlertKind, Alerts};
use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_coord::Redis;
use switchboard_domain::JobName;
use switchboard_store::{PgPool, failures};

/// The window failures are counted over.
pub const WINDOW_MINUTES: i64 = 5;
/// How long a minute's counter is kept (past the window, for clock skew between pods).
const KEEP: Duration = Duration::from_secs(15 * 60);
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
}

#[async_trait]
impl Job for QueueAlert {
    fn name(&self) -> JobName {
        JobName::QueueAlert
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let waiting = failures::inbox_waiting(&self.db, self.waiting_threshold + 1).await?;
        let failed = recent_failures(&self.redis).await?;
        let over = waiting > self.waiting_threshold || failed > self.failed_threshold;
        let figures = json!({
            "waiting": waiting,
            "waiting_threshold": self.waiting_threshold,
            "failed_last_5_minutes": failed,
            "failed_threshold": self.failed_threshold,
        });
        if over {
            let waiting_text = if waiting > self.waiting_threshold {
                format!("more than {} events", self.waiting_threshold)
            } else {
                format!("{waiting} events")
            };
            let message = format!(
                "{waiting_text} wait in the inbox and {failed} failed in the last {WINDOW_MINUTES} minutes"
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
