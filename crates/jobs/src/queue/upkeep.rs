//! Redis-side upkeep of the job queues (`channel-inbound`, `channel-outbound`) that apalis-redis 1.0 does not do safely
//! on its own, with bounded Lua scripts (each call touches at most a fixed number of jobs, so
//! Redis is never held for long).
//!
//! - **Promotion.** apalis-redis puts every pushed job in the scheduled set (score: its
//!   run-at second) and its fetch script moves all due ones to the active list with one
//!   `RPUSH … unpack(ids)`. Lua cannot unpack more than ~8000 values, so once more than that
//!   are due (a burst while workers are busy, a backlog left by a pod without workers, mass
//!   retries while Postgres is away) every fetch fails, every worker dies and restarts into
//!   the same failure, and nothing is processed again.
//! - **A short active list.** Each job a worker takes is removed from the active list twice:
//!   by the fetch (`LTRIM`) and again when its lease is taken (`LREM`, which finds nothing
//!   and so scans the whole list). Under a backlog of 50k jobs in the active list that scan
//!   cost Redis 1.3 ms per job: processing fell to a few hundred jobs a second and every
//!   pod's Redis calls (webhook dedup included) queued behind it.
//!
//!   So every pod, every [`PROMOTE_INTERVAL`], *parks* due jobs in a sorted set of its own
//!   (`{queue}:scheduled:parked`, same scores, [`PROMOTE_CHUNK`] per script call) where apalis-redis
//!   never looks, and tops the active list up to [`ACTIVE_TARGET`] from the oldest parked
//!   jobs. Order stays first in, first out; the active list stays short, so the `LREM` is
//!   cheap; the scheduled set holds only what was pushed since the last tick.
//! - **Vacuum.** apalis-redis's `Vacuum` reads the whole job-data hash (pending jobs
//!   included) in one script: under a backlog of 100k jobs that blocks Redis for seconds, and
//!   every pod's webhooks and sockets with it. [`vacuum`] pops ids from the done and dead
//!   sets instead, so its cost follows what finished, not what is queued.
//! - **Gone workers.** apalis-redis keeps a metadata hash per worker name and never deletes
//!   it, and every pod start and worker restart brings a new name. Each name is recorded
//!   when its worker starts; [`forget_gone_workers`] deletes the metadata of names whose
//!   heartbeat stopped [`WORKER_GONE_AFTER`] ago.

use crate::queue::QueueRef;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_domain::periodic;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Most due jobs one promotion script call parks.
pub const PROMOTE_CHUNK: usize = 1000;
/// How often each pod promotes due jobs.
pub const PROMOTE_INTERVAL: Duration = Duration::from_millis(100);
/// How long the active list is kept: enough for every worker of many pods between two
/// ticks (each pod tops it up every tick), short enough that a scan of it is cheap.
pub const ACTIVE_TARGET: usize = 500;
/// Most finished jobs one vacuum script call removes (per set).
pub const VACUUM_CHUNK: usize = 500;
/// How long a worker's heartbeat must have been silent before its metadata is deleted
/// (apalis-redis itself gives up on a worker after 15 s).
pub const WORKER_GONE_AFTER: Duration = Duration::from_secs(600);
/// Most worker names one clean-up script call looks at.
pub const FORGET_CHUNK: usize = 100;

/// Parks up to `ARGV[2]` jobs due at `ARGV[1]` (seconds): from the scheduled set to the
/// parked set, keeping their scores. Then moves the oldest parked jobs to the active list
/// until it holds `ARGV[3]`, and wakes the workers as apalis-redis's fetch does. Returns
/// `{parked, moved}`.
static PROMOTE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
local parked = #due / 2
if parked > 0 then
  local scored, ids = {}, {}
  for i = 1, #due, 2 do
    scored[#scored + 1] = due[i + 1]
    scored[#scored + 1] = due[i]
    ids[#ids + 1] = due[i]
  end
  redis.call('ZADD', KEYS[4], unpack(scored))
  redis.call('ZREM', KEYS[1], unpack(ids))
end
local moved = 0
local room = tonumber(ARGV[3]) - redis.call('LLEN', KEYS[2])
if room > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[4], room)
  local ids = {}
  for i = 1, #popped, 2 do ids[#ids + 1] = popped[i] end
  if #ids > 0 then
    redis.call('RPUSH', KEYS[2], unpack(ids))
    redis.call('DEL', KEYS[3])
    redis.call('LPUSH', KEYS[3], 1)
    moved = #ids
  end
end
return {parked, moved}
",
    )
});

/// Pops up to `ARGV[1]` ids from the done set and from the dead set, and deletes each job's
/// data, result and metadata (the keys apalis-redis 1.0 writes for a job). Returns
/// `{removed, removed}`.
static VACUUM_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local removed = 0
for _, set in ipairs({KEYS[3], KEYS[4]}) do
  local ids = redis.call('SPOP', set, ARGV[1])
  for _, id in ipairs(ids) do
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2] .. ':result', id)
    redis.call('DEL', KEYS[2] .. ':' .. id)
    removed = removed + 1
  end
end
return {removed, removed}
",
    )
});

/// Looks at up to `ARGV[4]` names recorded (in `KEYS[1]`) before `ARGV[2]` (seconds): a
/// name whose heartbeat in apalis-redis's workers set (`KEYS[2]`) is newer is looked at
/// again later; any other has its metadata hash (`ARGV[1]` + name) deleted and is
/// forgotten. Returns `{looked at, forgotten}`.
static FORGET_WORKERS_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local names = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[2], 'LIMIT', 0, ARGV[4])
local forgotten = 0
for _, name in ipairs(names) do
  local seen = redis.call('ZSCORE', KEYS[2], name)
  if seen and tonumber(seen) > tonumber(ARGV[2]) then
    redis.call('ZADD', KEYS[1], ARGV[3], name)
  else
    redis.call('DEL', ARGV[1] .. name)
    redis.call('ZREM', KEYS[1], name)
    forgotten = forgotten + 1
  end
end
return {#names, forgotten}
",
    )
});

/// The set of worker names started on `queue` (score: when last found alive, in seconds).
fn known_workers_set(queue: &QueueRef) -> String {
    format!("{}:known", queue.config().workers_set())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Records a worker name as it starts, for [`forget_gone_workers`].
pub async fn record_worker(queue: &QueueRef, name: &str) -> Result<(), redis::RedisError> {
    redis::cmd("ZADD")
        .arg(known_workers_set(queue))
        .arg(unix_now())
        .arg(name)
        .query_async::<()>(&mut queue.conn())
        .await
}

/// Deletes the metadata apalis-redis keeps for workers that are gone (stopped, restarted
/// under a new name, or killed with their pod); returns how many were forgotten.
pub async fn forget_gone_workers(queue: &QueueRef) -> Result<usize, redis::RedisError> {
    let now = unix_now();
    let config = queue.config();
    let mut call = FORGET_WORKERS_SCRIPT.prepare_invoke();
    call.key(known_workers_set(queue))
        .key(config.workers_set())
        .arg(format!("{}:metadata:", config.workers_set()))
        .arg(now.saturating_sub(WORKER_GONE_AFTER.as_secs()))
        .arg(now)
        .arg(FORGET_CHUNK);
    until_short_chunk(queue, &call, FORGET_CHUNK).await
}

/// The parked set of `queue`: due jobs waiting for room in the active list.
fn parked_set(queue: &QueueRef) -> String {
    format!("{}:parked", queue.config().scheduled_jobs_set())
}

/// Parks every job that is due (in chunks) and tops the active list up; returns how many
/// jobs moved to the active list.
pub async fn promote_due(queue: &QueueRef) -> Result<usize, redis::RedisError> {
    let now = unix_now();
    let config = queue.config();
    let mut call = PROMOTE_SCRIPT.prepare_invoke();
    call.key(config.scheduled_jobs_set())
        .key(config.active_jobs_list())
        .key(config.signal_list())
        .key(parked_set(queue))
        .arg(now)
        .arg(PROMOTE_CHUNK)
        .arg(ACTIVE_TARGET);
    until_short_chunk(queue, &call, PROMOTE_CHUNK).await
}

/// Removes finished (done or dead) jobs' data, metadata and results from Redis, in chunks;
/// returns how many jobs were removed.
pub async fn vacuum(queue: &QueueRef) -> Result<usize, redis::RedisError> {
    let config = queue.config();
    let mut call = VACUUM_SCRIPT.prepare_invoke();
    call.key(config.job_data_hash())
        .key(config.job_meta_hash())
        .key(config.done_jobs_set())
        .key(config.dead_jobs_set())
        .arg(VACUUM_CHUNK);
    until_short_chunk(queue, &call, VACUUM_CHUNK).await
}

/// Every key the upkeep scripts touch, read in one script: a read-only stand-in for running
/// them (for `/ready`), which fails the same way when the keys do not share a slot or the
/// node that serves it does not answer, and changes nothing.
static PROBE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
for _, key in ipairs(KEYS) do
  redis.call('EXISTS', key)
end
return #KEYS
",
    )
});

/// Runs [`PROBE_SCRIPT`] over the keys of [`promote_due`], [`vacuum`] and
/// [`forget_gone_workers`].
pub async fn probe(queue: &QueueRef) -> Result<(), redis::RedisError> {
    let config = queue.config();
    let mut call = PROBE_SCRIPT.prepare_invoke();
    call.key(known_workers_set(queue))
        .key(config.workers_set())
        .key(config.scheduled_jobs_set())
        .key(config.active_jobs_list())
        .key(config.signal_list())
        .key(parked_set(queue))
        .key(config.job_data_hash())
        .key(config.job_meta_hash())
        .key(config.done_jobs_set())
        .key(config.dead_jobs_set());
    let _: usize = call.invoke_async(&mut queue.conn()).await?;
    Ok(())
}

/// Invokes a chunked script, which returns `{handled, counted}`, until a call handles fewer
/// than `chunk`; returns the sum of what the calls counted.
async fn until_short_chunk(
    queue: &QueueRef,
    call: &redis::ScriptInvocation<'_>,
    chunk: usize,
) -> Result<usize, redis::RedisError> {
    let mut conn = queue.conn();
    let mut total = 0;
    loop {
        let (handled, counted): (usize, usize) = call.invoke_async(&mut conn).await?;
        total += counted;
        if handled < chunk {
            return Ok(total);
        }
    }
}

/// Runs [`promote_due`] every [`PROMOTE_INTERVAL`] until `token` is cancelled. Every pod runs
/// it, workers or not: the script is atomic, so pods never move a job twice.
pub fn spawn_promoter(queue: QueueRef, token: CancellationToken, tracker: &TaskTracker) {
    // Redis away: said once, tried again each tick (webhooks and the sweeper cope).
    periodic::every(
        "queue promotion",
        PROMOTE_INTERVAL,
        &token,
        tracker,
        move || {
            let queue = queue.clone();
            async move {
                let n = promote_due(&queue).await?;
                if n > 0 {
                    metrics::counter!("queue_jobs_promoted_total", "queue" => queue.name())
                        .increment(n as u64);
                }
                Ok::<(), redis::RedisError>(())
            }
        },
    );
}

/// How many jobs of a queue wait, by where they wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Depth {
    /// Pushed, not yet promoted (apalis-redis's scheduled set).
    pub scheduled: usize,
    /// Due, waiting for room in the active list.
    pub parked: usize,
    /// In the active list, for workers to take.
    pub active: usize,
}

impl Depth {
    /// Every waiting job.
    pub fn total(&self) -> usize {
        self.scheduled + self.parked + self.active
    }
}

/// The queue's waiting jobs, in one round trip.
pub async fn depth(queue: &QueueRef) -> Result<Depth, redis::RedisError> {
    let config = queue.config();
    let (scheduled, parked, active): (usize, usize, usize) = redis::pipe()
        .zcard(config.scheduled_jobs_set())
        .zcard(parked_set(queue))
        .llen(config.active_jobs_list())
        .query_async(&mut queue.conn())
        .await?;
    Ok(Depth {
        scheduled,
        parked,
        active,
    })
}

/// Jobs being worked on now: the in-flight sets of the workers that sent a heartbeat in the
/// last minute (two round trips; for `/metrics`, sampled on a timer).
pub async fn running(queue: &QueueRef) -> Result<usize, redis::RedisError> {
    let config = queue.config();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let workers = registered_since(queue, now.saturating_sub(60)).await?;
    if workers.is_empty() {
        return Ok(0);
    }
    let mut pipe = redis::pipe();
    for name in &workers {
        pipe.scard(format!("{}:{name}", config.inflight_jobs_set()));
    }
    let counts: Vec<usize> = pipe.query_async(&mut queue.conn()).await?;
    Ok(counts.into_iter().sum())
}

/// The workers of `queue` that registered or sent a heartbeat since `since` (unix seconds).
pub async fn registered_since(
    queue: &QueueRef,
    since: u64,
) -> Result<Vec<String>, redis::RedisError> {
    redis::cmd("ZRANGEBYSCORE")
        .arg(queue.config().workers_set())
        .arg(since)
        .arg("+inf")
        .query_async(&mut queue.conn())
        .await
}
