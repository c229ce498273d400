//! What a pod runs besides answering requests. Every piece is started on the lifecycle's
//! task tracker and stops on its shutdown token, so a drain waits for the jobs in hand.

use crate::state::AppState;
use switchboard_flows::{dispatch, inbound};
use switchboard_jobs::queue::upkeep;

/// Starts the pod's workers and sweepers on the lifecycle's tracker and token, so shutdown
/// waits for the jobs they hold.
pub(super) fn spawn(state: &AppState) {
    let config = &state.config;
    let identity = state.redis_work.workers_identity();
    let token = state.lifecycle.shutdown_token();
    let tracker = state.lifecycle.tasks();
    state.redis_work.clone().spawn(token.clone(), tracker);
    state.realtime.spawn_background(token.clone(), tracker);
    // The promoter stays a per-pod 100 ms timer, not a scheduled job: see
    // `switchboard_jobs::periodic::housekeeping`.
    upkeep::spawn_promoter(state.inbound.queue_ref(), token.clone(), tracker);
    upkeep::spawn_promoter(state.flows.outbound.queue_ref(), token.clone(), tracker);
    // WORKER_CONCURRENCY=0 makes an HTTP-and-sockets-only pod; the other pods run the jobs.
    if config.workers.concurrency > 0 {
        state.inbound.spawn_wake_listener(token.clone(), tracker);
        state
            .flows
            .outbound
            .spawn_wake_listener(token.clone(), tracker);
        // INBOUND_CONCURRENCY=0 leaves this pod's inbound work to the others.
        if config.workers.inbound_concurrency > 0 {
            inbound::spawn_workers(
                &state.inbound,
                state.flows.clone(),
                identity.clone(),
                config.workers.inbound_concurrency,
                token.clone(),
                tracker,
            );
        }
        dispatch::spawn_workers(
            state.flows.clone(),
            identity.clone(),
            config.workers.concurrency,
            token.clone(),
            tracker,
        );
    }
    dispatch::spawn_gauges(state.flows.clone(), token.clone(), tracker);
    // Every pod sends the alert deliveries that are due (a lease each, like replies).
    state.alerts.spawn_delivery(&token, tracker);
    // Every periodic job, once per slot across pods (AA2).
    crate::scheduled::build(state, &identity).spawn(token, tracker);
    crate::sampler::spawn(state.clone());
}
