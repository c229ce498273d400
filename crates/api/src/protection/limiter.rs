//! Rate limits by policy, shared by all pods through one Redis GCRA script
//! (`switchboard_coord::gcra`), with a per-pod fallback while Redis is unreachable.
//!
//! Fallback: a failed or slow (`RATE_LIMIT_REDIS_TIMEOUT_MS`) call marks the shared store
//! down for a second, during which every decision is made on this pod with the same
//! algorithm and the limit divided by `EXPECTED_PODS`, so the fleet as a whole stays near
//! the configured limit. One request a second then tries Redis again, and shared limiting
//! returns with it. The outage raises one alert (one claim across pods, see `alerts`), not
//! one per request. The fallback's table is the one piece of per-pod request state, bounded
//! in size, and only ever used while Redis is away.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use switchboard_config::{Config, RATE_LIMIT_POLICIES, RateSpec, parse_rate};
use switchboard_coord::{Redis, gcra};
use switchboard_jobs::alerts::{AlertKind, Alerts};
use tokio::sync::oneshot;

/// How long the shared store is considered down after a failure before it is tried again.
const RETRY_SHARED_AFTER: Duration = Duration::from_secs(1);
/// Most keys the per-pod fallback keeps.
const LOCAL_MAX_KEYS: usize = 100_000;

/// One policy's decision for one request.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    /// The policy.
    pub policy: &'static str,
    /// Its limit per period (the shared one; the fallback enforces a share of it).
    pub limit: u64,
    /// Whether the request may go on (always, in shadow mode).
    pub allowed: bool,
    /// Whether the policy enforces (not shadow): only then are headers sent.
    pub enforced: bool,
    /// Requests left right now.
    pub remaining: u64,
    /// When refused: how long until the next request would be allowed.
    pub retry_after: Duration,
}

struct Policy {
    spec: RateSpec,
    shadow: bool,
    /// The key's middle part: the policy name, except `login` for the per-email login
    /// limit (its keys are `limit:login:{sha256 of the address}`).
    key: &'static str,
}

struct Inner {
    redis: Redis,
    alerts: Alerts,
    policies: HashMap<&'static str, Policy>,
    expected_pods: u64,
    redis_timeout: Duration,
    started: Instant,
    /// Until when (µs since `started`) the shared store is considered down; 0 when up.
    down_until_us: AtomicU64,
    /// Whether this outage was already alerted.
    alerted: AtomicBool,
    /// The fallback: key → theoretical arrival time (µs since `started`).
    local: Mutex<HashMap<String, u64>>,
    /// Keys with a Redis call in flight, and the requests waiting to go in the next one.
    waiting: Mutex<HashMap<String, Vec<oneshot::Sender<Msg>>>>,
    /// Keys this pod saw refused, and until when (µs since `started`): a subject over a
    /// limit that is charged after the fact (see [`RateLimiter::blocked`]) is refused here
    /// without a Redis call until its refusal runs out.
    refused: Mutex<HashMap<String, u64>>,
}

/// What a waiting request is told.
enum Msg {
    /// Its decision (`None`: Redis failed, decide locally).
    Decided(Option<gcra::Decision>),
    /// Its turn to make the call, for itself and these.
    Lead(Vec<oneshot::Sender<Msg>>),
}

/// The pod's rate limiter; cheap to clone.
#[derive(Clone)]
pub struct RateLimiter(Arc<Inner>);

impl RateLimiter {
    /// The policies from the configuration (validated at load).
    pub fn new(config: &Config, redis: Redis, alerts: Alerts) -> Self {
        let policies = RATE_LIMIT_POLICIES
            .iter()
            .filter_map(|name| {
                let spec = parse_rate(config.rate_limit(name)).ok().flatten()?;
                let key = if *name == "login_email" {
                    "login"
                } else {
                    name
                };
                Some((
                    *name,
                    Policy {
                        spec,
                        shadow: config.rate_limit_shadowed(name),
                        key,
                    },
                ))
            })
            .collect();
        Self(Arc::new(Inner {
            redis,
            alerts,
            policies,
            expected_pods: u64::from(config.app.expected_pods),
            redis_timeout: config.rate_limit.redis_timeout,
            started: Instant::now(),
            down_until_us: AtomicU64::new(0),
            alerted: AtomicBool::new(false),
            local: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
        }))
    }

    /// The full Redis key a policy uses for `subject`.
    pub fn key(&self, policy: &str, subject: &str) -> Option<String> {
        let p = self.0.policies.get(policy)?;
        Some(self.0.redis.key(&format!("limit:{}:{subject}", p.key)))
    }

    /// Whether decisions are currently shared (Redis answers).
    pub fn shared(&self) -> bool {
        self.0.down_until_us.load(Ordering::Relaxed) == 0
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.0.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Counts one request of `subject` against `policy`; `None` when the policy is off.
    pub async fn check(&self, policy: &'static str, subject: &str) -> Option<Verdict> {
        let p = self.0.policies.get(policy)?;
        let key = self.0.redis.key(&format!("limit:{}:{subject}", p.key));
        let (decision, storage) = self.decide(p, &key).await;
        let enforced = !p.shadow;
        let outcome = match (decision.allowed, enforced) {
            (true, _) => "allowed",
            (false, true) => "refused",
            (false, false) => "would_block",
        };
        metrics::counter!(
            "rate_limit_decisions_total",
            "policy" => policy,
            "mode" => if enforced { "enforce" } else { "shadow" },
            "decision" => outcome,
            "storage" => storage,
        )
        .increment(1);
        if !decision.allowed && !enforced {
            tracing::warn!(
                policy,
                "would-have-blocked: rate limit exceeded (shadow mode)"
            );
        }
        Some(Verdict {
            policy,
            limit: p.spec.limit,
            allowed: decision.allowed || !enforced,
            enforced,
            remaining: decision.remaining,
            retry_after: decision.retry_after,
        })
    }

    /// Counts one request of `subject` against `policy` like [`RateLimiter::check`], and
    /// when that refuses, remembers on this pod until when, so [`RateLimiter::blocked`]
    /// refuses the subject's next requests without asking Redis. For limits charged after
    /// the request showed it is the subject's to pay for (failed webhooks, failed logins).
    pub async fn charge(&self, policy: &'static str, subject: &str) -> Option<Verdict> {
        let verdict = self.check(policy, subject).await?;
        if !verdict.allowed {
            let key = self.key(policy, subject)?;
            let until =
                self.now_us() + u64::try_from(verdict.retry_after.as_micros()).unwrap_or(u64::MAX);
            let mut refused = self
                .0
                .refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if refused.len() >= LOCAL_MAX_KEYS {
                let now = self.now_us();
                refused.retain(|_, until| *until > now);
            }
            if refused.len() < LOCAL_MAX_KEYS {
                refused.insert(key, until);
            }
        }
        Some(verdict)
    }

    /// The refusal this pod remembers for `subject` under `policy` (see
    /// [`RateLimiter::charge`]), if it still runs. No Redis call.
    pub fn blocked(&self, policy: &'static str, subject: &str) -> Option<Verdict> {
        let p = self.0.policies.get(policy)?;
        if p.shadow {
            return None;
        }
        let key = self.key(policy, subject)?;
        let now = self.now_us();
        let until = *self
            .0
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)?;
        (until > now).then(|| Verdict {
            policy,
            limit: p.spec.limit,
            allowed: false,
            enforced: true,
            remaining: 0,
            retry_after: Duration::from_micros(until - now),
        })
    }

    /// Whether one more request of `subject` would be allowed under `policy`, without
    /// counting it; `None` when the policy is off. Redis unreachable: this pod's table.
    pub async fn peek(&self, policy: &'static str, subject: &str) -> Option<Verdict> {
        let p = self.0.policies.get(policy)?;
        let key = self.key(policy, subject)?;
        let down_until = self.0.down_until_us.load(Ordering::Relaxed);
        let shared = if down_until != 0 && self.now_us() < down_until {
            None
        } else {
            let call = gcra::peek(&self.0.redis, &key, p.spec.limit, p.spec.period);
            tokio::time::timeout(self.0.redis_timeout, call)
                .await
                .ok()
                .and_then(Result::ok)
        };
        let decision = shared.unwrap_or_else(|| self.local_peek(p, &key));
        Some(Verdict {
            policy,
            limit: p.spec.limit,
            allowed: decision.allowed || p.shadow,
            enforced: !p.shadow,
            remaining: decision.remaining,
            retry_after: decision.retry_after,
        })
    }

    /// Gives back one request of `subject` counted under `policy` (it turned out not to
    /// be the subject's to pay for); best effort.
    pub async fn refund(&self, policy: &'static str, subject: &str) {
        let Some(p) = self.0.policies.get(policy) else {
            return;
        };
        let Some(key) = self.key(policy, subject) else {
            return;
        };
        let interval =
            gcra::interval_us((p.spec.limit / self.0.expected_pods).max(1), p.spec.period);
        if let Some(tat) = self
            .0
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&key)
        {
            *tat = tat.saturating_sub(interval);
        }
        let call = gcra::refund(&self.0.redis, &key, p.spec.limit, p.spec.period, 1);
        if let Ok(Err(e)) = tokio::time::timeout(self.0.redis_timeout, call).await {
            tracing::debug!(error = %e, "could not refund a rate limit");
        }
    }

    /// Forgets `subject`'s state under `policy` (e.g. the per-email login limit after a
    /// successful login); best effort.
    pub async fn reset(&self, policy: &'static str, subject: &str) {
        let Some(key) = self.key(policy, subject) else {
            return;
        };
        self.0
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        if let Err(e) = gcra::reset(&self.0.redis, &key).await {
            tracing::debug!(error = %e, "could not reset a rate limit");
        }
    }

    async fn decide(&self, p: &Policy, key: &str) -> (gcra::Decision, &'static str) {
        let down_until = self.0.down_until_us.load(Ordering::Relaxed);
        if down_until != 0 && self.now_us() < down_until {
            return (self.local(p, key), "local");
        }
        match self.ask_redis(p, key).await {
            Ok(decision) => {
                if down_until != 0 {
                    self.0.down_until_us.store(0, Ordering::Relaxed);
                    self.0.alerted.store(false, Ordering::Relaxed);
                    metrics::gauge!("rate_limit_storage_shared").set(1.0);
                    tracing::warn!("rate-limit storage is back: limits are shared again");
                    let alerts = self.0.alerts.clone();
                    switchboard_domain::periodic::detach(async move {
                        alerts
                            .resolve(AlertKind::RateLimitStorageDown, "redis")
                            .await;
                    });
                }
                (decision, "shared")
            }
            Err(failed) => {
                let retry_at = self.now_us()
                    + u64::try_from(RETRY_SHARED_AFTER.as_micros()).unwrap_or(u64::MAX);
                self.0.down_until_us.store(retry_at, Ordering::Relaxed);
                metrics::gauge!("rate_limit_storage_shared").set(0.0);
                if !self.0.alerted.swap(true, Ordering::Relaxed) {
                    let error = failed.unwrap_or_else(|| {
                        format!("no answer within {} ms", self.0.redis_timeout.as_millis())
                    });
                    tracing::warn!(%error, "rate-limit storage unreachable: limiting per pod");
                    self.0
                        .alerts
                        .raise(
                            AlertKind::RateLimitStorageDown,
                            "redis",
                            "rate-limit storage (Redis) unreachable: each pod limits on its own",
                            serde_json::json!({"expected_pods": self.0.expected_pods}),
                        )
                        .await;
                }
                (self.local(p, key), "local")
            }
        }
    }

    /// The shared decision. Requests for one key that arrive while a call for it is in
    /// flight wait and go together in the next call (as the intake batches webhooks), so a
    /// busy key costs one Redis call per round trip rather than one per request, and the
    /// decisions stay exact (one atomic script per batch). `Err` carries Redis's error, or
    /// `None` for a timeout.
    async fn ask_redis(&self, p: &Policy, key: &str) -> Result<gcra::Decision, Option<String>> {
        let mut batch = loop {
            let rx = {
                let mut waiting = self
                    .0
                    .waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                match waiting.get_mut(key) {
                    Some(queue) => {
                        let (tx, rx) = oneshot::channel();
                        queue.push(tx);
                        rx
                    }
                    None => {
                        waiting.insert(key.to_owned(), Vec::new());
                        break Vec::new();
                    }
                }
            };
            match rx.await {
                Ok(Msg::Decided(Some(d))) => return Ok(d),
                Ok(Msg::Decided(None)) => return Err(None),
                Ok(Msg::Lead(batch)) => break batch,
                // The leader's request was dropped mid-call: join again.
                Err(_) => continue,
            }
        };
        // This request leads: whatever happens to it, the next waiter takes over.
        let handoff = Handoff { limiter: self, key };
        let n = batch.len() as u64 + 1;
        let call = gcra::check_n(&self.0.redis, key, p.spec.limit, p.spec.period, n);
        let outcome = match tokio::time::timeout(self.0.redis_timeout, call).await {
            Ok(Ok(counted)) => Ok(counted),
            Ok(Err(e)) => Err(Some(e.to_string())),
            Err(_) => Err(None),
        };
        let cell = |i: u64| {
            outcome
                .as_ref()
                .ok()
                .map(|&(allowed, remaining, retry_after)| gcra::Decision {
                    allowed: i < allowed,
                    remaining: if i < allowed {
                        remaining + (allowed - 1 - i)
                    } else {
                        0
                    },
                    retry_after: if i < allowed {
                        Duration::ZERO
                    } else {
                        retry_after
                    },
                })
        };
        for (i, waiter) in batch.drain(..).enumerate() {
            let _ = waiter.send(Msg::Decided(cell(i as u64 + 1)));
        }
        drop(handoff);
        match cell(0) {
            Some(d) => Ok(d),
            None => Err(outcome.err().flatten()),
        }
    }

    /// [`RateLimiter::local`] without counting.
    fn local_peek(&self, p: &Policy, key: &str) -> gcra::Decision {
        let limit = (p.spec.limit / self.0.expected_pods).max(1);
        let interval = gcra::interval_us(limit, p.spec.period);
        let period = interval.saturating_mul(limit);
        let now = self.now_us();
        let table = self.0.local.lock().unwrap_or_else(PoisonError::into_inner);
        let tat = table.get(key).copied().unwrap_or(now).max(now);
        let ahead = tat + interval - now;
        if ahead > period {
            gcra::Decision {
                allowed: false,
                remaining: 0,
                retry_after: Duration::from_micros(ahead - period),
            }
        } else {
            gcra::Decision {
                allowed: true,
                remaining: (period - ahead) / interval + 1,
                retry_after: Duration::ZERO,
            }
        }
    }

    /// The same GCRA on this pod's clock, with the limit shared out over the expected pods.
    fn local(&self, p: &Policy, key: &str) -> gcra::Decision {
        let limit = (p.spec.limit / self.0.expected_pods).max(1);
        let interval = gcra::interval_us(limit, p.spec.period);
        let period = interval.saturating_mul(limit);
        let now = self.now_us();
        let mut table = self.0.local.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() >= LOCAL_MAX_KEYS {
            table.retain(|_, tat| *tat > now);
            if table.len() >= LOCAL_MAX_KEYS {
                table.clear();
            }
        }
        let tat = table.get(key).copied().unwrap_or(now).max(now);
        let new_tat = tat + interval;
        let ahead = new_tat - now;
        if ahead > period {
            return gcra::Decision {
                allowed: false,
                remaining: 0,
                retry_after: Duration::from_micros(ahead - period),
            };
        }
        table.insert(key.to_owned(), new_tat);
        gcra::Decision {
            allowed: true,
            remaining: (period - ahead) / interval,
            retry_after: Duration::ZERO,
        }
    }
}

/// Passes the lead for a key to its first waiter (or forgets the key) when the leading
/// request is done, or dropped mid-call (a client that went away).
struct Handoff<'a> {
    limiter: &'a RateLimiter,
    key: &'a str,
}

impl Drop for Handoff<'_> {
    fn drop(&mut self) {
        let mut waiting = self
            .limiter
            .0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(queue) = waiting.get_mut(self.key) else {
            return;
        };
        let mut queue = std::mem::take(queue);
        while !queue.is_empty() {
            let next = queue.remove(0);
            match next.send(Msg::Lead(queue)) {
                Ok(()) => return,
                Err(Msg::Lead(rest)) => queue = rest,
                Err(Msg::Decided(_)) => return,
            }
        }
        waiting.remove(self.key);
    }
}
