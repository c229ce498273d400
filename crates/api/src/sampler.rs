//! Each pod's sampler: every `BACKPRESSURE_SAMPLE_MS` it reads the queue depths (for
//! backpressure, which never asks Redis per request, and for `/metrics`) and the agent
//! health the `agent-health` job shares in Redis; every 15 s the failed and dead work in
//! Postgres. It raises `realtime_adapter_down` (this pod's own incident) when this pod's
//! Socket.IO adapter loses subscriptions, and resolves it when they are back. The figures
//! are the same on every pod (alert on their max); sampling them is per pod because each
//! pod serves its own `/metrics` and makes its own refusals.

use crate::state::AppState;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchboard_domain::periodic;
use switchboard_jobs::alerts::AlertKind;
use switchboard_jobs::periodic::agent_health;
use switchboard_jobs::queue::QueueRef;
use switchboard_jobs::queue::upkeep;
use switchboard_store::{StoreError, dead_letters};

/// How often Postgres is asked for failed and dead work.
const FAILURES_EVERY: Duration = Duration::from_secs(15);

async fn sample_queue(queue: &QueueRef) -> Option<usize> {
    let depth = match upkeep::depth(queue).await {
        Ok(d) => d,
        Err(e) => {
            tracing::debug!(queue = queue.name(), error = %e, "could not sample a queue");
            return None;
        }
    };
    let running = upkeep::running(queue).await.unwrap_or(0);
    let name = queue.name();
    let set = |state: &'static str, n: usize| {
        metrics::gauge!("queue_jobs", "queue" => name, "state" => state).set(n as f64);
    };
    set("waiting", depth.active + depth.parked);
    set("scheduled", depth.scheduled);
    set("active", running);
    Some(depth.total())
}

fn set_failures(f: dead_letters::Failures) {
    let set = |queue: &'static str, state: &'static str, n: i64| {
        metrics::gauge!("queue_jobs", "queue" => queue, "state" => state).set(n as f64);
    };
    set("channel-inbound", "failed", f.inbound_failed);
    set("channel-inbound", "dead", f.inbound_dead);
    set("channel-outbound", "failed", f.outbound_failed);
    set("channel-outbound", "dead", f.outbound_dead);
    // Kept under its older name too (alert on `max(inbox_events_parked) > 0`).
    metrics::gauge!("inbox_events_parked").set(f.inbound_dead as f64);
}

async fn sample_agent(state: &AppState) {
    match agent_health::read(&state.redis).await {
        Ok(Some(h)) => {
            metrics::gauge!("agent_up").set(if h.ok { 1.0 } else { 0.0 });
            metrics::gauge!("agent_consecutive_failures").set(h.consecutive_failures as f64);
            for s in ["closed", "open", "half_open"] {
                let v = if h.breaker == s { 1.0 } else { 0.0 };
                metrics::gauge!("agent_breaker", "state" => s).set(v);
            }
        }
        Ok(None) => {}
        Err(e) => tracing::debug!(error = %e, "could not read the agent's health"),
    }
}

/// Starts the sampler on the lifecycle's tracker.
pub fn spawn(state: AppState) {
    let token = state.lifecycle.shutdown_token();
    let every = state.config.backpressure.sample_interval;
    let tracker = state.lifecycle.tasks().clone();
    let sampled = state.clone();
    // Whether this pod has raised `realtime_adapter_down` and not yet resolved it.
    let adapter_down = Arc::new(AtomicBool::new(false));
    periodic::every("sampler", every, &token, &tracker, move || {
        let state = sampled.clone();
        let adapter_down = adapter_down.clone();
        async move {
            sample(&state, &adapter_down).await;
            Ok::<(), Infallible>(())
        }
    });
    periodic::every(
        "failed work count",
        FAILURES_EVERY,
        &token,
        &tracker,
        move || {
            let db = state.db.clone();
            async move {
                set_failures(dead_letters::failures(&db).await?);
                Ok::<(), StoreError>(())
            }
        },
    );
}

/// One sample of the queues, the agent's health and the realtime adapter.
async fn sample(state: &AppState, adapter_down: &AtomicBool) {
    let inbound = sample_queue(&state.inbound.queue_ref()).await;
    let outbound = sample_queue(&state.flows.outbound.queue_ref()).await;
    if let Some(waiting) = inbound {
        state.flows.load.set_backlog(waiting);
    }
    // A queue Redis cannot count keeps its last figure.
    state.protection.pressure.set_depths(
        inbound.unwrap_or_else(|| state.protection.pressure.depths().0),
        outbound.unwrap_or_else(|| state.protection.pressure.depths().1),
    );
    metrics::gauge!("http_in_flight").set(state.protection.pressure.in_flight() as f64);
    sample_agent(state).await;
    let adapter = state.realtime.health();
    if adapter.checked_at.is_none() {
        return;
    }
    // A pod's own condition: its incident is scoped to the pod and resolved by it.
    let scope = state.config.pod_id();
    if adapter.ok {
        if adapter_down.swap(false, Ordering::Relaxed) {
            state
                .alerts
                .resolve(AlertKind::RealtimeAdapterDown, &scope)
                .await;
        }
    } else if !adapter_down.swap(true, Ordering::Relaxed) {
        state
            .alerts
            .raise(
                AlertKind::RealtimeAdapterDown,
                &scope,
                "realtime: a pod lost its Redis pub/sub subscriptions; cross-pod events \
                 do not reach its sockets until it re-subscribes",
                serde_json::json!({"expected": adapter.expected, "subscribed": adapter.subscribed}),
            )
            .await;
    }
}
