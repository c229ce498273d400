//! Liveness and readiness (AA7). `/health` touches nothing; `/ready` checks Postgres and
//! Redis concurrently, each under a short timeout, reports the last Redis work check
//! ([`switchboard_jobs::redis_check`]), and answers 503 while draining.

use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
}

#[utoipa::path(get, path = "/health", tag = "operations",
    responses((status = 200, description = "The process is alive; touches nothing")))]
async fn health() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

#[derive(Serialize, ToSchema)]
struct Check {
    ok: bool,
    latency_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The setting that most likely fixes a failing check (e.g. `DATABASE_TLS_CA`); the
    /// pod's log has the whole line.
    #[serde(skip_serializing_if = "Option::is_none")]
    setting: Option<&'static str>,
}

#[derive(Serialize, ToSchema)]
struct Readiness {
    status: &'static str,
    /// When these checks ran: answers within a second of it are served again.
    checked_at: chrono::DateTime<chrono::Utc>,
    draining: bool,
    checks: BTreeMap<&'static str, Check>,
    realtime: Realtime,
    /// The drafting agent as the `agent-health` job last found it (shared by all pods);
    /// informational.
    agent: Option<AgentView>,
    /// Rate limiting and load on this pod; informational.
    protection: ProtectionView,
}

/// The last `agent-health` probe.
#[derive(Serialize, ToSchema)]
struct AgentView {
    ok: bool,
    /// `ok`, `not_configured`, `error` or `unreachable`.
    status: String,
    latency_ms: u64,
    consecutive_failures: u64,
    /// The shared breaker: `closed`, `open` or `half_open`.
    breaker: String,
    checked_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Serialize, ToSchema)]
struct ProtectionView {
    /// `shared` (Redis) or `local` (this pod alone, while Redis is unreachable).
    rate_limits: &'static str,
    in_flight: usize,
}

/// Informational: it does not decide readiness. Redis itself is a check above; a lost
/// subscription is re-made by the watchdog within a tick, and failing every pod's
/// readiness over it would not bring one event back.
#[derive(Serialize, ToSchema)]
struct Realtime {
    sockets: usize,
    adapter: switchboard_realtime::AdapterHealth,
}

#[utoipa::path(get, path = "/ready", tag = "operations",
    responses((status = 200, description = "Postgres and Redis answer", body = Readiness),
        (status = 503, description = "A dependency is failing, or the pod is draining", body = Readiness)))]
async fn ready(State(state): State<AppState>) -> axum::response::Response {
    // Draining answers 503 at once (AA7), never a cached 200.
    if state.lifecycle.is_draining() {
        let (status, body) = readiness(&state).await;
        return (status, axum::Json(body)).into_response();
    }
    // Probes come from every load balancer and anyone who finds the URL: the checks run at
    // most once a second per pod, one probe at a time, and the others get that answer.
    let mut cached = state.ready_cache.lock().await;
    if let Some((at, status, body)) = &*cached {
        if at.elapsed() < READY_CACHE_FOR {
            return (*status, axum::Json(body.clone())).into_response();
        }
    }
    let (status, body) = readiness(&state).await;
    *cached = Some((Instant::now(), status, body.clone()));
    (status, axum::Json(body)).into_response()
}

/// How long one readiness answer is served again.
const READY_CACHE_FOR: Duration = Duration::from_secs(1);

/// The last readiness answer and when it was computed.
pub type ReadyCache = tokio::sync::Mutex<Option<(Instant, StatusCode, serde_json::Value)>>;

/// Runs the checks: the status to answer and the body.
async fn readiness(state: &AppState) -> (StatusCode, serde_json::Value) {
    let timeout = state.config.lifecycle.ready_timeout;
    let db = state.db.clone();
    // The body says which dependency fails, never the driver's text (hosts, users, paths):
    // that goes to the log.
    let postgres = check(timeout, async move {
        switchboard_store::ping(&db).await.map_err(|e| {
            tracing::warn!(problem = %switchboard_store::explain(&e), "readiness: Postgres check failed");
            switchboard_store::cause(&e).setting()
        })
    });
    let redis = check(timeout, async {
        state.redis.ping().await.map_err(|e| {
            tracing::warn!(problem = %e.explain(), "readiness: Redis check failed");
            e.setting()
        })
    });
    let agent = async {
        let read = switchboard_jobs::periodic::agent_health::read(&state.redis);
        match tokio::time::timeout(timeout, read).await {
            Ok(Ok(Some(h))) => Some(AgentView {
                ok: h.ok,
                status: h.status,
                latency_ms: h.latency_ms,
                consecutive_failures: h.consecutive_failures,
                breaker: h.breaker,
                checked_at: h.checked_at,
            }),
            _ => None,
        }
    };
    // Before the pod's first run of the Redis work check has ended, this probe runs it.
    let first_work = async {
        if state.redis_work.last().is_none() {
            let _ = tokio::time::timeout(timeout, state.redis_work.check()).await;
        }
    };
    let (postgres, redis, agent, ()) = tokio::join!(postgres, redis, agent, first_work);
    let redis_work = redis_work(state);
    let draining = state.lifecycle.is_draining();
    let ok = postgres.ok && redis.ok && redis_work.ok && !draining;
    let body = Readiness {
        status: if draining {
            "draining"
        } else if ok {
            "ready"
        } else {
            "unavailable"
        },
        checked_at: chrono::Utc::now(),
        draining,
        checks: BTreeMap::from([
            ("postgres", postgres),
            ("redis", redis),
            ("redis_work", redis_work),
        ]),
        realtime: Realtime {
            sockets: state.realtime.local_sockets(),
            adapter: adapter_health(state),
        },
        agent,
        protection: ProtectionView {
            rate_limits: if state.protection.limiter.shared() {
                "shared"
            } else {
                "local"
            },
            in_flight: state.protection.pressure.in_flight(),
        },
    };
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        serde_json::to_value(body).unwrap_or(serde_json::Value::Null),
    )
}

/// The last run of the Redis work check (every script once per hash tag, the workers'
/// registration): a Redis that answers `PING` but refuses the pod's scripts, as a
/// misconfigured cluster does, is not ready. The failing step is named; the log has the
/// error.
fn redis_work(state: &AppState) -> Check {
    match state.redis_work.last() {
        None => Check {
            ok: false,
            latency_ms: 0,
            error: Some("not checked yet (timed out)".to_owned()),
            setting: None,
        },
        Some(outcome) => Check {
            ok: outcome.failure.is_none(),
            latency_ms: u64::try_from(outcome.took.as_millis()).unwrap_or(u64::MAX),
            error: outcome.failure.map(|f| format!("failed at: {}", f.step)),
            setting: None,
        },
    }
}

/// The adapter's health without the watchdog's error text (the watchdog logs it).
fn adapter_health(state: &AppState) -> switchboard_realtime::AdapterHealth {
    let mut health = state.realtime.health();
    if health.error.is_some() {
        health.error = Some("unavailable".to_owned());
    }
    health
}

async fn check<F>(timeout: Duration, probe: F) -> Check
where
    F: Future<Output = Result<(), Option<&'static str>>>,
{
    let started = Instant::now();
    let outcome = tokio::time::timeout(timeout, probe).await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match outcome {
        Ok(Ok(())) => Check {
            ok: true,
            latency_ms,
            error: None,
            setting: None,
        },
        Ok(Err(setting)) => Check {
            ok: false,
            latency_ms,
            error: Some("unavailable".to_owned()),
            setting,
        },
        Err(_) => Check {
            ok: false,
            latency_ms,
            error: Some(format!("timed out after {} ms", timeout.as_millis())),
            setting: None,
        },
    }
}
