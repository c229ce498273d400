//! A fixed-window counter shared by all pods: one atomic script per hit, windows measured
//! by the Redis server's clock (so pod clock skew does not matter).

use crate::{CoordError, Redis};
use std::sync::LazyLock;
use std::time::Duration;

/// The outcome of one counted hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the hit is within the limit.
    pub allowed: bool,
    /// Hits left in the current window.
    pub remaining: u64,
    /// Time until the window resets.
    pub reset_after: Duration,
}

const SCRIPT_SRC: &str = r"
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}
";

/// The script, hashed once (its SHA is what `EVALSHA` sends).
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SCRIPT_SRC));

/// Counts one hit against `limit` per `window` under `limit:{name}`.
pub async fn hit(
    redis: &Redis,
    name: &str,
    limit: u64,
    window: Duration,
) -> Result<Decision, CoordError> {
    let mut conn = redis.conn();
    let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1);
    let (count, ttl_ms): (u64, i64) = SCRIPT
        .key(redis.key(&format!("limit:{name}")))
        .arg(window_ms)
        .invoke_async(&mut conn)
        .await?;
    Ok(Decision {
        allowed: count <= limit,
        remaining: limit.saturating_sub(count),
        reset_after: Duration::from_millis(u64::try_from(ttl_ms).unwrap_or(0)),
    })
}

/// Forgets the counter, e.g. after a successful login.
pub async fn reset(redis: &Redis, name: &str) -> Result<(), CoordError> {
    let mut conn = redis.conn();
    let _: i64 = redis::cmd("DEL")
        .arg(redis.key(&format!("limit:{name}")))
        .query_async(&mut conn)
        .await?;
    Ok(())
}
