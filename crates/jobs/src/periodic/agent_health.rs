//! `agent-health`: one pod per slot probes the drafting agent and writes the result to
//! Redis (`agent:health`), where every pod reads it for `/ready` and `/metrics`. More than
//! [`FAILING_AFTER`] failed probes in a row, or the agent's shared breaker open, raise the
//! `agent_failing` alert (once per window across pods).

use crate::alerts::{AlertKind, Alerts};
use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use switchboard_channels::agent::{AgentClient, ProbeError};
use switchboard_coord::Redis;
use switchboard_coord::breaker::BreakerState;
use switchboard_domain::JobName;

/// Failed probes in a row after which the alert is raised.
pub const FAILING_AFTER: u64 = 5;

/// How long a result is kept: a result older than this says nothing.
const TTL: Duration = Duration::from_secs(600);

const KEY: &str = "agent:health";

/// The agent's health as the last probe found it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AgentHealth {
    /// Whether the agent answered (below 500) the last probe.
    pub ok: bool,
    /// `ok`, `not_configured`, `error` or `unreachable`.
    pub status: String,
    /// The probe's latency.
    pub latency_ms: u64,
    /// Failed probes in a row.
    pub consecutive_failures: u64,
    /// The shared breaker: `closed`, `open` or `half_open`.
    pub breaker: String,
    /// When the probe ran.
    pub checked_at: DateTime<Utc>,
}

/// The shared result, if a probe ran in the last 10 minutes.
pub async fn read(redis: &Redis) -> Result<Option<AgentHealth>, redis::RedisError> {
    let mut conn = redis.conn();
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(redis.key(KEY))
        .query_async(&mut conn)
        .await?;
    let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
    let Ok(checked_at) = DateTime::parse_from_rfc3339(&get("checked_at")) else {
        return Ok(None);
    };
    Ok(Some(AgentHealth {
        ok: get("ok") == "1",
        status: get("status"),
        latency_ms: get("latency_ms").parse().unwrap_or(0),
        consecutive_failures: get("failures").parse().unwrap_or(0),
        breaker: get("breaker"),
        checked_at: checked_at.with_timezone(&Utc),
    }))
}

/// The scheduled job.
pub struct AgentHealthProbe {
    /// The agent client (its breaker is shared in Redis).
    pub agent: AgentClient,
    /// Where the result goes.
    pub redis: Redis,
    /// Where the alert goes.
    pub alerts: Alerts,
    /// Probe timeout.
    pub timeout: Duration,
}

#[async_trait]
impl Job for AgentHealthProbe {
    fn name(&self) -> JobName {
        JobName::AgentHealth
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let started = Instant::now();
        let probe = self.agent.probe(self.timeout).await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let status = match &probe {
            Ok(()) => "ok",
            Err(ProbeError::NotConfigured) => "not_configured",
            Err(ProbeError::Status(_)) => "error",
            Err(ProbeError::Transport(_)) => "unreachable",
        };
        let breaker = match self.agent.breaker().state().await {
            Ok(BreakerState::Closed) => "closed",
            Ok(BreakerState::Open) => "open",
            Ok(BreakerState::HalfOpen) => "half_open",
            Err(_) => "unknown",
        };
        let failed = matches!(probe, Err(ProbeError::Status(_) | ProbeError::Transport(_)));
        let key = self.redis.key(KEY);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset_multiple(
                &key,
                &[
                    ("ok", if probe.is_ok() { "1" } else { "0" }),
                    ("status", status),
                    ("breaker", breaker),
                    ("latency_ms", &latency_ms.to_string()),
                    ("checked_at", &Utc::now().to_rfc3339()),
                ],
            )
            .ignore();
        if failed {
            pipe.hincr(&key, "failures", 1);
        } else {
            pipe.hset(&key, "failures", 0).ignore();
            pipe.hget(&key, "failures");
        }
        pipe.pexpire(&key, i64::try_from(TTL.as_millis()).unwrap_or(i64::MAX))
            .ignore();
        let (failures,): (u64,) = pipe.query_async(&mut self.redis.conn()).await?;
        if let Err(e) = &probe {
            tracing::warn!(error = %e, failures, "agent health probe failed");
        }
        if probe.is_ok() && breaker != "open" {
            self.alerts.resolve(AlertKind::AgentFailing, "agent").await;
        } else if failures > FAILING_AFTER || breaker == "open" {
            self.alerts
                .raise(
                    AlertKind::AgentFailing,
                    "agent",
                    &format!(
                        "the agent failed {failures} health probes in a row (breaker {breaker})"
                    ),
                    json!({"failures": failures, "breaker": breaker, "status": status}),
                )
                .await;
        }
        Ok(
            json!({"status": status, "latency_ms": latency_ms, "failures": failures, "breaker": breaker}),
        )
    }
}
