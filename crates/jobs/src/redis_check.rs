//! Whether this pod can do its Redis work, not only reach Redis: every script and pipeline
//! shape the pod uses runs once per hash tag, and the pod's queue workers are registered.
//!
//! A `PING` answers on any node of a Redis Cluster, while a script whose keys span slots, or
//! a worker whose registration a node refuses, fails on every call: the pod would look
//! ready while its workers restart in a loop. This check runs at start and then
//! periodically (every second while it fails), and `/ready` reports its last result with
//! the step that failed.

use crate::queue::QueueRef;
use crate::queue::upkeep;
use chrono::{DateTime, Utc};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use switchboard_coord::breaker::{self, Breaker, BreakerConfig};
use switchboard_coord::{Redis, dedup, gcra};
use switchboard_domain::periodic;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How often the check runs while it passes.
const EVERY: Duration = Duration::from_secs(10);
/// How often it runs while it fails.
const RETRY: Duration = Duration::from_secs(1);
/// How long after the pod starts its workers may still be registering: until then a missing
/// registration does not fail the check.
const REGISTRATION_GRACE: Duration = Duration::from_secs(10);
/// The breaker family the probe breaker belongs to (it never opens: see [`run_once`]).
const PROBE_FAMILY: &str = "ready-probe";

/// The last outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// When it ran.
    pub checked_at: DateTime<Utc>,
    /// How long it took.
    pub took: Duration,
    /// The step that failed and why (`None`: every step passed).
    pub failure: Option<Failure>,
}

/// A failed step.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Which step: `limiter`, `dedup`, `breaker`, `claim`, `queue <name>: <what>`,
    /// `worker registration <queue>`.
    pub step: String,
    /// The Redis error, for the log.
    pub error: String,
}

/// What the check needs: the pod's Redis, its queues, and the identity its workers'
/// names start with (`None` on a pod that runs no workers).
#[derive(Clone)]
pub struct RedisWork {
    redis: Redis,
    queues: Vec<QueueRef>,
    workers: Option<String>,
    started: Instant,
    last: Arc<RwLock<Option<Outcome>>>,
}

impl RedisWork {
    /// A check that has not run yet.
    pub fn new(redis: Redis, queues: Vec<QueueRef>, workers: Option<String>) -> Self {
        Self {
            redis,
            queues,
            workers,
            started: Instant::now(),
            last: Arc::default(),
        }
    }

    /// The name prefix of the pod's queue workers (a fresh one when it runs none, for the
    /// scheduler's claims).
    pub fn workers_identity(&self) -> String {
        self.workers
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string())
    }

    /// The last outcome (`None` before the first run ends).
    pub fn last(&self) -> Option<Outcome> {
        self.last
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Runs every step once and records the outcome.
    pub async fn check(&self) -> Outcome {
        let started = Instant::now();
        let failure = self.run_once().await.err();
        if let Some(f) = &failure {
            tracing::warn!(step = %f.step, error = %f.error, "readiness: the pod cannot do its Redis work");
        }
        let outcome = Outcome {
            checked_at: Utc::now(),
            took: started.elapsed(),
            failure,
        };
        *self.last.write().unwrap_or_else(PoisonError::into_inner) = Some(outcome.clone());
        outcome
    }

    /// Checks now, then every [`EVERY`] (every [`RETRY`] while failing), until `token` is
    /// cancelled.
    pub fn spawn(self, token: CancellationToken, tracker: &TaskTracker) {
        periodic::paced(&token, tracker, move || {
            let this = self.clone();
            async move {
                if this.check().await.failure.is_some() {
                    RETRY
                } else {
                    EVERY
                }
            }
        });
    }

    async fn run_once(&self) -> Result<(), Failure> {
        let redis = &self.redis;
        let fail = |step: &str| {
            let step = step.to_owned();
            move |e: &dyn std::fmt::Display| Failure {
                step,
                error: e.to_string(),
            }
        };
        let probe = redis.key("ready-probe");
        gcra::check(
            redis,
            &format!("{probe}:limit"),
            1_000_000,
            Duration::from_secs(60),
        )
        .await
        .map_err(|e| fail("limiter")(&e))?;
        let scope = vec![format!("ready-probe:{}", uuid::Uuid::new_v4().simple())];
        dedup::claim_many(redis, &scope)
            .await
            .map_err(|e| fail("dedup")(&e))?;
        dedup::release_many(redis, &scope)
            .await
            .map_err(|e| fail("dedup")(&e))?;
        // A threshold no probe reaches: the failure script runs, the breaker never opens.
        let config = BreakerConfig {
            threshold: u32::MAX,
            ..BreakerConfig::default()
        };
        let probe_breaker = Breaker::new(redis.clone(), "probe", config).in_family(PROBE_FAMILY);
        async {
            probe_breaker.admit().await?;
            probe_breaker.record_failure().await?;
            probe_breaker.state().await?;
            probe_breaker.record_success().await?;
            breaker::family_states(redis, PROBE_FAMILY, u32::MAX).await?;
            Ok::<_, switchboard_coord::CoordError>(())
        }
        .await
        .map_err(|e| fail("breaker")(&e))?;
        redis
            .set_nx(
                &format!("ready-probe:{}", uuid::Uuid::new_v4().simple()),
                "1",
                Duration::from_secs(5),
            )
            .await
            .map_err(|e| fail("claim")(&e))?;
        for queue in &self.queues {
            let name = queue.name();
            let step = |what: &str| format!("queue {name}: {what}");
            upkeep::depth(queue)
                .await
                .map_err(|e| fail(&step("depth"))(&e))?;
            // Read-only: the upkeep job runs the real scripts once per slot on one pod.
            upkeep::probe(queue)
                .await
                .map_err(|e| fail(&step("upkeep keys"))(&e))?;
            upkeep::running(queue)
                .await
                .map_err(|e| fail(&step("running"))(&e))?;
            if let Some(identity) = &self.workers {
                let registered = upkeep::registered_since(queue, registration_horizon())
                    .await
                    .map_err(|e| fail(&format!("worker registration {name}"))(&e))?;
                let prefix = format!("{identity}-{name}-");
                let settling = self.started.elapsed() < REGISTRATION_GRACE;
                if !settling && !registered.iter().any(|w| w.starts_with(&prefix)) {
                    return Err(Failure {
                        step: format!("worker registration {name}"),
                        error: "no worker of this pod is registered on the queue".into(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Workers registered or heartbeating since this many seconds ago count as registered
/// (apalis-redis's heartbeat is 5 s; three are allowed to be missed).
fn registration_horizon() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    now.saturating_sub(15)
}
