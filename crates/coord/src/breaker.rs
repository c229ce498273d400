//! A circuit breaker whose state lives in Redis, so every pod counts the same failures and
//! sees the same open state (AA1).
//!
//! Closed: calls go through; each failure increments a counter that expires after
//! `window`. When the counter reaches `threshold` the breaker opens for `cooldown` (a key
//! with a TTL), and the counter is kept past the cool-down so the breaker remembers it
//! tripped. After the cool-down the breaker is half-open: [`Breaker::admit`] lets exactly one
//! caller on any pod through as the probe (a `SET NX PX probe_ttl` key, so a probe whose pod
//! died frees the slot by itself) and defers the others. The probe's success closes the
//! breaker; its failure re-opens it at once because the counter is still high.
//!
//! [`Breaker::is_open`] is the simpler check for callers that let every call through once
//! the cool-down is over (the agent client).

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
    /// How long one half-open probe may take before another caller may probe instead.
    pub probe_ttl: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            threshold: 5,
            window: Duration::from_secs(60),
            cooldown: Duration::from_secs(30),
            probe_ttl: Duration::from_secs(30),
        }
    }
}

/// A named breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    redis: Redis,
    name: String,
    config: BreakerConfig,
    /// `{prefix}:{breaker:<family or name>}`: the hash-tagged stem of this breaker's keys
    /// and of its family's registry, so each script runs in one cluster slot.
    stem: String,
    /// Whether opening records the breaker in its family's registry.
    registered: bool,
}

/// What recording a failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureOutcome {
    /// Failures counted in the window so far.
    pub failures: u32,
    /// Whether this failure opened the breaker.
    pub opened: bool,
}

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls are refused until the cool-down ends.
    Open,
    /// The cool-down is over; one probe decides.
    HalfOpen,
}

impl BreakerState {
    /// The label used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// What [`Breaker::admit`] decided for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The breaker is closed: call.
    Closed,
    /// Half-open and this caller holds the one probe: call, then record the result.
    Probe,
    /// Do not call; ask again after `retry_in` (the rest of the cool-down, or of the probe
    /// another caller holds).
    Open {
        /// How long until asking again makes sense.
        retry_in: Duration,
    },
}

/// KEYS: failures, open, probe, registry (all in one slot). ARGV: window ms, threshold,
/// cooldown ms, name, 1 to record the breaker in the registry when it opens.
const FAILURE_SRC: &str = r"
local n = redis.call('INCR', KEYS[1])
local threshold = tonumber(ARGV[2])
local opened = 0
if n >= threshold then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[3]))
  if redis.call('SET', KEYS[2], n, 'PX', ARGV[3], 'NX') then
    opened = 1
    redis.call('DEL', KEYS[3])
    if ARGV[5] == '1' then
      redis.call('ZADD', KEYS[4], redis.call('TIME')[1], ARGV[4])
    end
  end
else
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return {n, opened}
";

/// KEYS: failures, open, probe. ARGV: threshold, probe ttl ms.
/// Returns {0} closed, {1} probe, {2, ms} ask again in ms: the rest of the cool-down, or
/// while another caller's probe is out, at most a second (its answer decides).
const ADMIT_SRC: &str = r"
local open = redis.call('PTTL', KEYS[2])
if open > 0 then return {2, open} end
if open == -1 then return {2, 1000} end
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n < tonumber(ARGV[1]) then return {0, 0} end
if redis.call('SET', KEYS[3], '1', 'PX', ARGV[2], 'NX') then return {1, 0} end
return {2, math.min(math.max(redis.call('PTTL', KEYS[3]), 1), 1000)}
";

/// KEYS: registry. ARGV: the family's key stem with its colon, threshold. Drops closed
/// breakers from the registry and returns the others as {name, 'open'|'half_open'} pairs,
/// atomically, so a breaker that opens meanwhile is never dropped.
const FAMILY_SRC: &str = r"
local out = {}
for _, name in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local base = ARGV[1] .. name
  if redis.call('EXISTS', base .. ':open') == 1 then
    table.insert(out, name); table.insert(out, 'open')
  elseif tonumber(redis.call('GET', base .. ':failures') or '0') >= tonumber(ARGV[2]) then
    table.insert(out, name); table.insert(out, 'half_open')
  else
    redis.call('ZREM', KEYS[1], name)
  end
end
return out
";

/// The scripts, hashed once (their SHA is what `EVALSHA` sends).
static FAILURE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(FAILURE_SRC));
static ADMIT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(ADMIT_SRC));
static FAMILY: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(FAMILY_SRC));

impl Breaker {
    /// A breaker called `name` (e.g. `agent`, `outbound:slack:{connection}`).
    pub fn new(redis: Redis, name: &str, config: BreakerConfig) -> Self {
        Self {
            stem: stem(&redis, name),
            redis,
            name: name.to_owned(),
            config,
            registered: false,
        }
    }

    /// Records the breaker in `family`'s registry whenever it opens, so
    /// [`family_states`] can report every breaker of the family that is not closed
    /// (e.g. one breaker per connection, reported per channel).
    pub fn in_family(mut self, family: &str) -> Self {
        self.stem = stem(&self.redis, family);
        self.registered = true;
        self
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn failures_key(&self) -> String {
        format!("{}:{}:failures", self.stem, self.name)
    }

    fn open_key(&self) -> String {
        format!("{}:{}:open", self.stem, self.name)
    }

    fn probe_key(&self) -> String {
        format!("{}:{}:probe", self.stem, self.name)
    }

    /// Whether calls should be refused right now (open, not half-open).
    pub async fn is_open(&self) -> Result<bool, CoordError> {
        let mut conn = self.redis.conn();
        let open: bool = redis::cmd("EXISTS")
            .arg(self.open_key())
            .query_async(&mut conn)
            .await?;
        Ok(open)
    }

    /// Decides whether one call may go out now; half-open lets one caller at a time through.
    pub async fn admit(&self) -> Result<Admission, CoordError> {
        let mut conn = self.redis.conn();
        let (verdict, ms): (u8, u64) = ADMIT
            .key(self.failures_key())
            .key(self.open_key())
            .key(self.probe_key())
            .arg(self.config.threshold)
            .arg(millis(self.config.probe_ttl))
            .invoke_async(&mut conn)
            .await?;
        Ok(match verdict {
            0 => Admission::Closed,
            1 => Admission::Probe,
            _ => Admission::Open {
                retry_in: Duration::from_millis(ms),
            },
        })
    }

    /// Where the breaker stands, without changing anything.
    pub async fn state(&self) -> Result<BreakerState, CoordError> {
        let mut conn = self.redis.conn();
        let (open, failures): (bool, Option<u32>) = redis::pipe()
            .cmd("EXISTS")
            .arg(self.open_key())
            .cmd("GET")
            .arg(self.failures_key())
            .query_async(&mut conn)
            .await?;
        Ok(if open {
            BreakerState::Open
        } else if failures.unwrap_or(0) >= self.config.threshold {
            BreakerState::HalfOpen
        } else {
            BreakerState::Closed
        })
    }

    /// Records a failed call.
    pub async fn record_failure(&self) -> Result<FailureOutcome, CoordError> {
        let mut conn = self.redis.conn();
        let (failures, opened): (u32, u32) = FAILURE
            .key(self.failures_key())
            .key(self.open_key())
            .key(self.probe_key())
            .key(registry_key(&self.stem))
            .arg(millis(self.config.window))
            .arg(self.config.threshold)
            .arg(millis(self.config.cooldown))
            .arg(&self.name)
            .arg(u8::from(self.registered))
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
            .arg(self.probe_key())
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

/// Every breaker of `family` that is open or half-open, by name; closed ones leave the
/// registry. `threshold` must be the family's configured threshold.
pub async fn family_states(
    redis: &Redis,
    family: &str,
    threshold: u32,
) -> Result<Vec<(String, BreakerState)>, CoordError> {
    let mut conn = redis.conn();
    let stem = stem(redis, family);
    let flat: Vec<String> = FAMILY
        .key(registry_key(&stem))
        .arg(format!("{stem}:"))
        .arg(threshold)
        .invoke_async(&mut conn)
        .await?;
    Ok(flat
        .chunks_exact(2)
        .map(|pair| {
            let state = if pair[1] == "open" {
                BreakerState::Open
            } else {
                BreakerState::HalfOpen
            };
            (pair[0].clone(), state)
        })
        .collect())
}

fn stem(redis: &Redis, group: &str) -> String {
    redis.tagged(&format!("breaker:{group}"))
}

fn registry_key(stem: &str) -> String {
    format!("{stem}:registry")
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
