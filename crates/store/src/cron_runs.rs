//! `cron_runs`: one row per (job, slot) across all pods (AA2). The primary key is the lock:
//! the pod whose `INSERT … ON CONFLICT DO NOTHING` returns a row runs the slot. The run
//! holds a lease it renews while it works; a run whose pod died (still `running`, lease
//! lapsed) is taken over once by another pod with one atomic `UPDATE … RETURNING`.

use crate::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use std::time::Duration;

/// A run this pod now holds.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Held {
    /// The job.
    pub job: String,
    /// The slot.
    pub slot: DateTime<Utc>,
    /// 1 for the first run of the slot, 2 for the retry of a run whose pod died.
    pub attempt: i16,
    /// The pod whose run was taken over (retries only).
    pub previous_pod: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The job returned normally.
    Ok,
    /// The job returned an error (or panicked).
    Failed,
}

impl Outcome {
    /// The `cron_runs.status` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
        }
    }
}

pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Claims `slot` of `job` for `pod_id` with a lease of `lease`: `true` for exactly one pod.
pub async fn claim(
    pool: &PgPool,
    job: &str,
    slot: DateTime<Utc>,
    pod_id: &str,
    lease: Duration,
) -> Result<bool, StoreError> {
    let won: Option<i16> = sqlx::query_scalar(
        "INSERT INTO cron_runs (job, slot, pod_id, lease_until)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4))
         ON CONFLICT (job, slot) DO NOTHING RETURNING attempt",
    )
    .bind(job)
    .bind(slot)
    .bind(pod_id)
    .bind(secs(lease))
    .fetch_optional(pool)
    .await?;
    Ok(won.is_some())
}

/// Extends the lease of a run this pod holds; `false` when it no longer holds it (taken over
/// after a stall, or finished).
pub async fn renew(
    pool: &PgPool,
    held: &Held,
    pod_id: &str,
    lease: Duration,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "UPDATE cron_runs SET lease_until = now() + make_interval(secs => $5)
         WHERE job = $1 AND slot = $2 AND attempt = $3 AND pod_id = $4 AND status = 'running'",
    )
    .bind(&held.job)
    .bind(held.slot)
    .bind(held.attempt)
    .bind(pod_id)
    .bind(secs(lease))
    .execute(pool)
    .await?
    .rows_affected()
        == 1)
}

/// Records how a held run ended. A run that lost its lease to a retry records nothing.
pub async fn finish(
    pool: &PgPool,
    held: &Held,
    pod_id: &str,
    outcome: Outcome,
    detail: &Value,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "UPDATE cron_runs SET status = $5, finished_at = now(), detail = $6
         WHERE job = $1 AND slot = $2 AND attempt = $3 AND pod_id = $4 AND status = 'running'",
    )
    .bind(&held.job)
    .bind(held.slot)
    .bind(held.attempt)
    .bind(pod_id)
    .bind(outcome.as_str())
    .bind(detail)
    .execute(pool)
    .await?
    .rows_affected()
        == 1)
}

/// Takes over the oldest first-attempt run of `jobs` whose pod died (lease lapsed), at most
/// one per call; exactly one pod gets each (the row lock and the re-checked `WHERE`).
pub async fn take_over_expired(
    pool: &PgPool,
    jobs: &[&str],
    pod_id: &str,
    lease: Duration,
) -> Result<Option<Held>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE cron_runs c SET attempt = c.attempt + 1, previous_pod = c.pod_id, pod_id = $2,
                started_at = now(), lease_until = now() + make_interval(secs => $3)
         FROM (SELECT job, slot FROM cron_runs
               WHERE status = 'running' AND lease_until < now() AND attempt = 1
                 AND job = ANY($1)
               ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED) d
         WHERE c.job = d.job AND c.slot = d.slot
           AND c.status = 'running' AND c.lease_until < now() AND c.attempt = 1
         RETURNING c.job, c.slot, c.attempt, c.previous_pod",
    )
    .bind(jobs)
    .bind(pod_id)
    .bind(secs(lease))
    .fetch_optional(pool)
    .await?)
}

/// Marks retried runs of `jobs` whose second pod died too as `abandoned`; returns them.
pub async fn abandon_expired(pool: &PgPool, jobs: &[&str]) -> Result<Vec<Held>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE cron_runs SET status = 'abandoned', finished_at = now()
         WHERE status = 'running' AND lease_until < now() AND attempt >= 2 AND job = ANY($1)
         RETURNING job, slot, attempt, previous_pod",
    )
    .bind(jobs)
    .fetch_all(pool)
    .await?)
}

/// Deletes `job`'s runs older than `keep` (finished or not), and its successful runs beyond
/// the newest `keep_runs` of them; returns how many went.
///
/// The count bounds the rows of a job that runs every few seconds (`autopilot-send` writes
/// 43 200 a day) whatever `keep` is, while failed and abandoned runs stay for the whole
/// `keep`. Deleting an old slot's row cannot let it run again: a pod claims only the latest
/// slot of a schedule (or, at start-up, the latest missed one), never one that `keep_runs`
/// newer runs have followed.
pub async fn prune(
    pool: &PgPool,
    job: &str,
    keep: Duration,
    keep_runs: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM cron_runs
         WHERE job = $1
           AND (slot < now() - make_interval(secs => $2)
                OR (status = 'ok'
                    AND slot <= (SELECT slot FROM cron_runs WHERE job = $1 AND status = 'ok'
                                 ORDER BY slot DESC OFFSET $3 LIMIT 1)))",
    )
    .bind(job)
    .bind(secs(keep))
    .bind(keep_runs)
    .execute(pool)
    .await?
    .rows_affected())
}
