//! Liveness and readiness (AA7). `/health` touches nothing; `/ready` checks Postgres and
//! Redis concurrently, each under a short timeout, and answers 503 while draining.

use crate::state::AppState;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
}

async fn health() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

#[derive(Serialize)]
struct Check {
    ok: bool,
    latency_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct Readiness {
    status: &'static str,
    draining: bool,
    checks: BTreeMap<&'static str, Check>,
    realtime: Realtime,
}

/// Informational: it does not decide readiness. Redis itself is a check above; a lost
/// subscription is re-made by the watchdog within a tick, and failing every pod's
/// readiness over it would not bring one event back.
#[derive(Serialize)]
struct Realtime {
    sockets: usize,
    adapter: switchboard_realtime::AdapterHealth,
}

async fn ready(State(state): State<AppState>) -> impl IntoResponse {
    let timeout = state.config.ready_timeout();
    let db = state.db.clone();
    let postgres = check(timeout, async move {
        switchboard_store::ping(&db)
            .await
            .map_err(|e| e.to_string())
    });
    let redis = check(timeout, async {
        state.redis.ping().await.map_err(|e| e.to_string())
    });
    let (postgres, redis) = tokio::join!(postgres, redis);
    let draining = state.lifecycle.is_draining();
    let ok = postgres.ok && redis.ok && !draining;
    let body = Readiness {
        status: if draining {
            "draining"
        } else if ok {
            "ready"
        } else {
            "unavailable"
        },
        draining,
        checks: BTreeMap::from([("postgres", postgres), ("redis", redis)]),
        realtime: Realtime {
            sockets: state.realtime.local_sockets(),
            adapter: state.realtime.health(),
        },
    };
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body))
}

async fn check<F>(timeout: Duration, probe: F) -> Check
where
    F: Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    let outcome = tokio::time::timeout(timeout, probe).await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match outcome {
        Ok(Ok(())) => Check {
            ok: true,
            latency_ms,
            error: None,
        },
        Ok(Err(e)) => Check {
            ok: false,
            latency_ms,
            error: Some(e),
        },
        Err(_) => Check {
            ok: false,
            latency_ms,
            error: Some(format!("timed out after {} ms", timeout.as_millis())),
        },
    }
}
