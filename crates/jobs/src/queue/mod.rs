//! The two job queues on apalis-redis (`channel-inbound`, `channel-outbound`), and the
//! supervised workers that drain them.
//!
//! apalis-redis is the fast path, not the truth: the inbox and outbox rows in Postgres are,
//! and the sweepers push again what Redis lost. Known behaviours of apalis-redis 1.0
//! handled here:
//! - an idle worker fetches only on its heartbeat unless polled: a push wakes this pod's
//!   workers at once (a `Notify`) and, through a Redis notification, every other pod's
//!   (`wake.rs`); a worker still polls every `QUEUE_POLL_MS` (150) for what comes due and
//!   for a notification lost while its subscription was down;
//! - worker names are identities in Redis: ours are unique per pod, process, app instance
//!   and restart;
//! - one Redis error can leave a worker's backend dead: a supervisor restarts the worker;
//! - a job held by a dead worker returns only after heartbeat × missed heartbeats: we use
//!   5 s × 3, and the sweepers are the backstop;
//! - finished jobs are acknowledged only with `persist_results(true)`, which keeps each
//!   job's data and result in Redis until vacuumed;
//! - the scheduled set, the active list, the vacuum and the metadata of gone workers need
//!   bounded upkeep of our own: [`upkeep`] (the promoter on every pod, the rest in the
//!   `queue-upkeep` scheduled job).

mod supervise;
pub mod upkeep;
mod wake;

pub use supervise::supervise;
use wake::Announcer;

use apalis::prelude::*;
use apalis_core::backend::ext::poll_strategy::{PollWith, Strategy};
use apalis_redis::{Config as QueueConfig, RedisStorage};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;
use switchboard_coord::Redis;
use switchboard_domain::jobs::{InboundJob, OutboundJob};
use tokio::sync::Notify;
use uuid::Uuid;

/// Why a push did not reach Redis.
#[derive(Debug, thiserror::Error)]
#[error("could not push to {queue}: {source}")]
pub struct PushError {
    queue: &'static str,
    #[source]
    source: apalis_core::backend::TaskSinkError<apalis_redis::Error>,
}

/// A queue's keys and connection, for the upkeep scripts (whatever the job type).
#[derive(Clone)]
pub struct QueueRef {
    name: &'static str,
    config: QueueConfig,
    conn: switchboard_coord::Conn,
}

impl QueueRef {
    /// The queue's name (`channel-inbound`, `channel-outbound`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn config(&self) -> &QueueConfig {
        &self.config
    }

    pub(crate) fn conn(&self) -> switchboard_coord::Conn {
        self.conn.clone()
    }
}

/// Producer handle for one apalis-redis queue of `J` jobs.
pub struct JobQueue<J> {
    name: &'static str,
    storage: RedisStorage<J, switchboard_coord::Conn>,
    /// Rung after every push (this pod's or, through [`Announcer`], another pod's), so an
    /// idle worker fetches without waiting for a poll.
    pushed: Arc<Notify>,
    announcer: Announcer,
    poll: Duration,
}

impl<J> Clone for JobQueue<J> {
    fn clone(&self) -> Self {
        Self {
            name: self.name,
            storage: self.storage.clone(),
            pushed: self.pushed.clone(),
            announcer: self.announcer.clone(),
            poll: self.poll,
        }
    }
}

impl<J> std::fmt::Debug for JobQueue<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JobQueue({})", self.name)
    }
}

/// The `channel-inbound` queue.
pub type InboundQueue = JobQueue<InboundJob>;
/// The `channel-outbound` queue.
pub type OutboundQueue = JobQueue<OutboundJob>;

/// How often an idle worker asks for work unless told otherwise (`QUEUE_POLL_MS`).
pub const POLL_INTERVAL: Duration = Duration::from_millis(150);

impl<J> JobQueue<J>
where
    J: Serialize + DeserializeOwned + Send + Sync + Unpin + 'static,
{
    /// The queue `name` under the pod's key prefix.
    pub fn new(redis: &Redis, name: &'static str) -> Self {
        // The queue's name carries the hash tag, so every key apalis derives from it (and
        // our upkeep keys derived from those) lands in one cluster slot: its scripts touch
        // several of them at once.
        let config = QueueConfig::default()
            .queue(redis.tagged(&format!("queue:{name}")))
            .heartbeat_interval(Duration::from_secs(5))
            .missed_heartbeats(3)
            // apalis-redis acknowledges a finished job (removes it from the worker's
            // in-flight set) only while persisting results. Without acks the in-flight sets
            // grow without bound, a restarted worker's orphans are all re-enqueued, and past
            // ~8000 the orphan script fails ("too many results to unpack") and kills workers.
            .persist_results(true)
            .emit_events(false);
        Self {
            name,
            storage: RedisStorage::new(redis.conn()).with_config(config),
            pushed: Arc::new(Notify::new()),
            announcer: Announcer {
                redis: redis.clone(),
                channel: redis.key(&format!("queue:{name}:pushed")).into(),
                instance: Uuid::new_v4().simple().to_string().into(),
            },
            poll: POLL_INTERVAL,
        }
    }

    /// The same queue with idle workers polling every `poll`.
    pub fn with_poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// Enqueues many jobs with one bulk push.
    pub async fn push_many(&self, jobs: Vec<J>) -> Result<(), PushError> {
        let mut storage = self.storage.clone();
        storage.push_bulk(jobs).await.map_err(|source| PushError {
            queue: self.name,
            source,
        })?;
        // A permit is kept when the worker is busy fetching, so this push is never missed.
        self.pushed.notify_one();
        self.announcer.announce();
        Ok(())
    }

    /// What wakes this pod's idle workers of this queue: rung by this pod's pushes and by
    /// the pushes other pods announce.
    pub fn push_signal(&self) -> Arc<Notify> {
        self.pushed.clone()
    }

    /// The queue's keys and connection, for upkeep.
    pub fn queue_ref(&self) -> QueueRef {
        let mut storage = self.storage.clone();
        QueueRef {
            name: self.name,
            config: self.storage.get_config().clone(),
            conn: storage.get_connection().clone(),
        }
    }

    /// The storage, for scheduled pushes.
    pub fn storage(&self) -> &RedisStorage<J, switchboard_coord::Conn> {
        &self.storage
    }

    /// The backend a worker of this pod fetches from: woken by every push at once (this
    /// pod's, and other pods' through [`Self::spawn_wake_listener`]), and every poll
    /// interval for jobs coming due and for notifications that were lost.
    pub fn backend(&self) -> PollWith<RedisStorage<J, switchboard_coord::Conn>, Strategy> {
        let pushes = futures::stream::unfold(self.pushed.clone(), |pushed| async move {
            pushed.notified().await;
            Some(((), pushed))
        });
        self.storage
            .clone()
            .poll_with_strategy(Strategy::new().stream(Box::pin(pushes)).interval(self.poll))
    }
}

impl InboundQueue {
    /// The `channel-inbound` queue of this deployment.
    pub fn inbound(redis: &Redis) -> Self {
        Self::new(redis, "channel-inbound")
    }

    /// Enqueues many inbox events with one bulk push, without a trace to continue (the
    /// sweeper's and a replay's: the job then links to the row's).
    pub async fn push_events(&self, event_ids: &[Uuid]) -> Result<(), PushError> {
        self.push_many(
            event_ids
                .iter()
                .map(|&event_id| InboundJob {
                    event_id,
                    traceparent: None,
                })
                .collect(),
        )
        .await
    }
}

impl OutboundQueue {
    /// The `channel-outbound` queue of this deployment.
    pub fn outbound(redis: &Redis) -> Self {
        Self::new(redis, "channel-outbound")
    }

    /// Enqueues outbox rows with one bulk push, each job continuing the trace of the span
    /// that pushes it (the release's), if it is exported.
    pub async fn push_rows(&self, outbox_ids: &[Uuid]) -> Result<(), PushError> {
        let traceparent = switchboard_domain::trace::current();
        self.push_many(
            outbox_ids
                .iter()
                .map(|&outbox_id| OutboundJob {
                    outbox_id,
                    traceparent,
                })
                .collect(),
        )
        .await
    }
}
