//! A rate limit shared by all pods: GCRA (the generic cell rate algorithm) in one Redis Lua
//! script. One key per call, so it runs on Redis Cluster; the Redis server's clock (`TIME`),
//! so pod clock skew does not matter; integer microseconds, so no float rounding; allowed,
//! remaining and retry-after come back in one round trip.
//!
//! The key holds the "theoretical arrival time" (TAT) of the next request. A request is
//! allowed when `TAT + interval - now <= period` (a full burst of `limit` fits in one
//! `period`), and moves the TAT on by `interval = period / limit`. A refused request changes
//! nothing, so a client hammering a closed limit does not push its own reopening back.
//! Requests that arrive together for one key can be counted in one call ([`check_n`]): the
//! first ones that fit are allowed, atomically, as if they had come one by one.

use crate::{CoordError, Redis};
use std::sync::LazyLock;
use std::time::Duration;

/// The outcome of one request against a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is within the limit.
    pub allowed: bool,
    /// Requests that would still be allowed right now.
    pub remaining: u64,
    /// When refused: how long until one more request would be allowed.
    pub retry_after: Duration,
}

/// `KEYS[1]` the TAT; `ARGV[1]` the emission interval and `ARGV[2]` the period, both in
/// microseconds; `ARGV[3]` how many requests are asking at once. Returns `{allowed (how many
/// of them), remaining, retry_after_us}`.
const SCRIPT_SRC: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local fit = math.floor((now + period - tat) / interval)
if fit > n then fit = n end
if fit <= 0 then
  return {0, 0, tat + interval - now - period}
end
local new_tat = tat + fit * interval
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
local retry = 0
if fit < n then retry = new_tat + interval - now - period end
return {fit, math.floor((period - (new_tat - now)) / interval), retry}
";

/// The script, hashed once (its SHA is what `EVALSHA` sends).
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SCRIPT_SRC));

/// Whether one more request would be allowed, changing nothing. `KEYS[1]` the TAT;
/// `ARGV[1]` the interval and `ARGV[2]` the period in microseconds. Returns `{allowed (0 or
/// 1), remaining, retry_after_us}`.
const PEEK_SRC: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local fit = math.floor((now + period - tat) / interval)
if fit <= 0 then
  return {0, 0, tat + interval - now - period}
end
return {1, fit, 0}
";

/// Gives back `ARGV[2]` requests' worth of a key's allowance: the TAT moves back by that
/// many intervals (`ARGV[1]`, microseconds), never before now. Returns nothing useful.
const REFUND_SRC: &str = r"
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local new_tat = tat - tonumber(ARGV[1]) * tonumber(ARGV[2])
if new_tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
end
return 1
";

static PEEK: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(PEEK_SRC));
static REFUND: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REFUND_SRC));

/// Whether one more request under `key` would be allowed now, without counting it: for
/// limits charged only after the request showed what it is (a failed login, a webhook whose
/// signature did not verify).
pub async fn peek(
    redis: &Redis,
    key: &str,
    limit: u64,
    period: Duration,
) -> Result<Decision, CoordError> {
    let interval = interval_us(limit, period);
    let period_us = interval.saturating_mul(limit.max(1));
    let (allowed, remaining, retry_us): (i64, i64, i64) = PEEK
        .key(key)
        .arg(interval)
        .arg(period_us)
        .invoke_async(&mut redis.conn())
        .await?;
    Ok(Decision {
        allowed: allowed == 1,
        remaining: u64::try_from(remaining).unwrap_or(0),
        retry_after: Duration::from_micros(u64::try_from(retry_us).unwrap_or(0)),
    })
}

/// Gives back `n` requests counted under `key` (a request counted before it turned out not
/// to be the key's to pay for).
pub async fn refund(
    redis: &Redis,
    key: &str,
    limit: u64,
    period: Duration,
    n: u64,
) -> Result<(), CoordError> {
    let _: i64 = REFUND
        .key(key)
        .arg(interval_us(limit, period))
        .arg(n)
        .invoke_async(&mut redis.conn())
        .await?;
    Ok(())
}

/// The emission interval of `limit` per `period`, in microseconds (at least 1).
pub fn interval_us(limit: u64, period: Duration) -> u64 {
    let period_us = u64::try_from(period.as_micros()).unwrap_or(u64::MAX);
    (period_us / limit.max(1)).max(1)
}

/// Counts one request against `limit` per `period` under the full key `key`.
pub async fn check(
    redis: &Redis,
    key: &str,
    limit: u64,
    period: Duration,
) -> Result<Decision, CoordError> {
    let (allowed, remaining, retry_after) = check_n(redis, key, limit, period, 1).await?;
    Ok(Decision {
        allowed: allowed == 1,
        remaining,
        retry_after,
    })
}

/// Counts `n` requests arriving together (one round trip for all of them): returns how many
/// are allowed (the first ones), what remains after them, and when the next would fit.
pub async fn check_n(
    redis: &Redis,
    key: &str,
    limit: u64,
    period: Duration,
    n: u64,
) -> Result<(u64, u64, Duration), CoordError> {
    let interval = interval_us(limit, period);
    // The period as the script sees it: a whole number of intervals, so `limit` fit exactly.
    let period_us = interval.saturating_mul(limit.max(1));
    let mut conn = redis.conn();
    let (allowed, remaining, retry_us): (i64, i64, i64) = SCRIPT
        .key(key)
        .arg(interval)
        .arg(period_us)
        .arg(n.max(1))
        .invoke_async(&mut conn)
        .await?;
    Ok((
        u64::try_from(allowed).unwrap_or(0),
        u64::try_from(remaining).unwrap_or(0),
        Duration::from_micros(u64::try_from(retry_us).unwrap_or(0)),
    ))
}

/// Forgets a key's state (e.g. the login limit per email after a successful login).
pub async fn reset(redis: &Redis, key: &str) -> Result<(), CoordError> {
    let mut conn = redis.conn();
    let _: i64 = redis::cmd("DEL").arg(key).query_async(&mut conn).await?;
    Ok(())
}
