//! Redis-side upkeep of the `channel-inbound` queue that apalis-redis 1.0 does not do safely
//! on its own, with bounded Lua scripts (each call touches at most a fixed number of jobs, so
//! Redis is never held for long).
//!
//! - **Promotion.** apalis-redis puts every pushed job in the scheduled set (score: its
//!   run-at second) and its fetch script moves all due ones to the active list with one
//!   `RPUSH … unpack(ids)`. Lua cannot unpack more than ~8000 values, so once more than that
//!   are due (a burst while workers are busy, a backlog left by a pod without workers, mass
//!   retries while Postgres is away) every fetch fails, every worker dies and restarts into
//!   the same failure, and nothing is processed again. Every pod therefore moves due jobs to
//!   the active list itself, [`PROMOTE_CHUNK`] at a time, every [`PROMOTE_INTERVAL`].
//! - **Vacuum.** apalis-redis's `Vacuum` reads the whole job-data hash (pending jobs
//!   included) in one script: under a backlog of 100k jobs that blocks Redis for seconds, and
//!   every pod's webhooks and sockets with it. [`vacuum`] pops ids from the done and dead
//!   sets instead, so its cost follows what finished, not what is queued.

use crate::queue::InboundQueue;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Most due jobs one promotion script call moves.
pub const PROMOTE_CHUNK: usize = 1000;
/// How often each pod promotes due jobs.
pub const PROMOTE_INTERVAL: Duration = Duration::from_millis(100);
/// Most finished jobs one vacuum script call removes (per set).
pub const VACUUM_CHUNK: usize = 500;

/// Moves up to `ARGV[2]` jobs due at `ARGV[1]` (seconds) from the scheduled set to the
/// active list and wakes the workers, as apalis-redis's fetch does, but bounded.
static PROMOTE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[1], 'LIMIT', 0, ARGV[2])
if #ids == 0 then return 0 end
redis.call('RPUSH', KEYS[2], unpack(ids))
redis.call('ZREM', KEYS[1], unpack(ids))
redis.call('DEL', KEYS[3])
redis.call('LPUSH', KEYS[3], 1)
return #ids
",
    )
});

/// Pops up to `ARGV[1]` ids from the done set and from the dead set, and deletes each job's
/// data, result and metadata (the keys apalis-redis 1.0 writes for a job).
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
return removed
",
    )
});

/// Moves every job that is due from the scheduled set to the active list, in chunks;
/// returns how many moved.
pub async fn promote_due(queue: &InboundQueue) -> Result<usize, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let config = queue.storage().get_config();
    let mut call = PROMOTE_SCRIPT.prepare_invoke();
    call.key(config.scheduled_jobs_set())
        .key(config.active_jobs_list())
        .key(config.signal_list())
        .arg(now)
        .arg(PROMOTE_CHUNK);
    until_short_chunk(queue, &call, PROMOTE_CHUNK).await
}

/// Removes finished (done or dead) jobs' data, metadata and results from Redis, in chunks;
/// returns how many jobs were removed.
pub async fn vacuum(queue: &InboundQueue) -> Result<usize, String> {
    let config = queue.storage().get_config();
    let mut call = VACUUM_SCRIPT.prepare_invoke();
    call.key(config.job_data_hash())
        .key(config.job_meta_hash())
        .key(config.done_jobs_set())
        .key(config.dead_jobs_set())
        .arg(VACUUM_CHUNK);
    until_short_chunk(queue, &call, VACUUM_CHUNK).await
}

/// Invokes a chunked script until a call handles fewer than `chunk` jobs; returns the total.
async fn until_short_chunk(
    queue: &InboundQueue,
    call: &redis::ScriptInvocation<'_>,
    chunk: usize,
) -> Result<usize, String> {
    let mut storage = queue.storage().clone();
    let conn = storage.get_connection();
    let mut total = 0;
    loop {
        let n: usize = call.invoke_async(conn).await.map_err(|e| e.to_string())?;
        total += n;
        if n < chunk {
            return Ok(total);
        }
    }
}

/// Runs [`promote_due`] every [`PROMOTE_INTERVAL`] until `token` is cancelled. Every pod runs
/// it, workers or not: the script is atomic, so pods never move a job twice.
pub fn spawn_promoter(queue: InboundQueue, token: CancellationToken, tracker: &TaskTracker) {
    tracker.spawn(async move {
        let mut tick = tokio::time::interval(PROMOTE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                () = token.cancelled() => break,
                _ = tick.tick() => {}
            }
            match promote_due(&queue).await {
                Ok(n) => {
                    failing = false;
                    if n > 0 {
                        metrics::counter!("queue_jobs_promoted_total").increment(n as u64);
                    }
                }
                // Redis away: say so once, keep trying (webhooks and the sweeper cope).
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "queue promotion failed");
                }
                Err(_) => {}
            }
        }
    });
}
