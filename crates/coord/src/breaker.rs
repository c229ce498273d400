//! A circuit breaker whose state lives in Redis, so every pod counts the same failures and
//! sees the same open state (AA1).
//!
//! Closed: calls go through; each failure increments a counter that expires after
//! `window`. When the counter reaches `threshold` the breaker opens for `cooldown` (a key
//! with a TTL). When that key expires the next call is let through (half-open); a success
//! resets the counter, a failure re-opens at once because the counter is still high.

use crate::{CoordError, Redis};
use std::sync::LazyLock;
use std::time::Duration;

/// Breaker settings.
#[derive(Debug, Clone, Copy)]
pub struct BreakerConfig {
    /// Consecutive failures (within `window`) that open the breaker.
    pub threshold: u32,
    /// How long failures are remembered.
    pub window: Duration,
    /// How long the breaker stays open.
    pub cooldown: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            threshold: 5,
            window: Duration::from_secs(60),
            cooldown: Duration::from_secs(30),
        }
    }
}

/// A named breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    redis: Redis,
    name: String,
    config: BreakerConfig,
}

/// What recording a failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureOutcome {
    /// Failures counted in the window so far.
    pub failures: u32,
    /// Whether this failure opened the breaker.
    pub opened: bool,
}

const FAILURE_SRC: &str = r"
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local opened = 0
if n >= tonumber(ARGV[2]) then
  if redis.call('SET', KEYS[2], n, 'PX', ARGV[3], 'NX') then opened = 1 end
end
return {n, opened}
";

/// The failure script, hashed once (its SHA is what `EVALSHA` sends).
static FAILURE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(FAILURE_SRC));

impl Breaker {
    /// A breaker called `name` (e.g. `agent`, `channel:slack`).
    pub fn new(redis: Redis, name: &str, config: BreakerConfig) -> Self {
        Self {
            redis,
            name: name.to_owned(),
            config,
        }
    }

    fn failures_key(&self) -> String {
        self.redis.key(&format!("breaker:{}:failures", self.name))
    }

    fn open_key(&self) -> String {
        self.redis.key(&format!("breaker:{}:open", self.name))
    }

    /// Whether calls should be refused right now.
    pub async fn is_open(&self) -> Result<bool, CoordError> {
        let mut conn = self.redis.conn();
        let open: bool = redis::cmd("EXISTS")
            .arg(self.open_key())
            .query_async(&mut conn)
            .await?;
        Ok(open)
    }

    /// Records a failed call.
    pub async fn record_failure(&self) -> Result<FailureOutcome, CoordError> {
        let mut conn = self.redis.conn();
        let (failures, opened): (u32, u32) = FAILURE
            .key(self.failures_key())
            .key(self.open_key())
            .arg(millis(self.config.window))
            .arg(self.config.threshold)
            .arg(millis(self.config.cooldown))
            .invoke_async(&mut conn)
            .await?;
        Ok(FailureOutcome {
            failures,
            opened: opened == 1,
        })
    }

    /// Records a successful call: closes the breaker and forgets failures.
    pub async fn record_success(&self) -> Result<(), CoordError> {
        let mut conn = self.redis.conn();
        let _: i64 = redis::cmd("DEL")
            .arg(self.failures_key())
            .arg(self.open_key())
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
