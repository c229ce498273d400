//! One circuit breaker per (channel, connection), in Redis so every pod counts the same
//! failures (see `switchboard_coord::breaker`), and its state in `/metrics`.
//!
//! The breakers are per connection because one customer's revoked bot token or suspended
//! Twilio number must not stop every other org's replies on that channel. Metrics report
//! them per channel (how many are open or half-open), so label values come from a fixed
//! set and never name a connection.

use crate::Deps;
use std::collections::HashMap;
use std::time::Duration;
use switchboard_coord::breaker::{self, Breaker, BreakerState};
use switchboard_coord::{CoordError, Redis};
use switchboard_domain::{ChannelKind, periodic};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// The breakers' family (their registry in Redis).
pub const FAMILY: &str = "outbound";

/// How often each pod refreshes the breaker gauges from Redis.
const GAUGE_INTERVAL: Duration = Duration::from_secs(2);

/// The breaker of `connection_id` on `channel`.
pub fn breaker(deps: &Deps, channel: ChannelKind, connection_id: Uuid) -> Breaker {
    let name = format!("{FAMILY}:{channel}:{connection_id}");
    Breaker::new(deps.redis.clone(), &name, deps.dispatch.settings().breaker).in_family(FAMILY)
}

/// Records a call's result on the breaker; returns whether a failure opened it.
pub(super) async fn note(breaker: &Breaker, ok: bool) -> bool {
    if ok {
        if let Err(e) = breaker.record_success().await {
            tracing::warn!(breaker = breaker.name(), error = %e, "could not reset the breaker");
        }
        return false;
    }
    match breaker.record_failure().await {
        Ok(outcome) if outcome.opened => {
            tracing::warn!(
                breaker = breaker.name(),
                failures = outcome.failures,
                "outbound circuit breaker opened"
            );
            true
        }
        Ok(_) => false,
        Err(e) => {
            tracing::warn!(breaker = breaker.name(), error = %e, "could not record a failure");
            false
        }
    }
}

/// Sets `outbound_breakers{channel, state}` to how many connections' breakers are open and
/// half-open; every pod reports the same shared numbers.
pub async fn refresh_gauges(redis: &Redis, threshold: u32) -> Result<(), CoordError> {
    let states = breaker::family_states(redis, FAMILY, threshold).await?;
    let mut counts: HashMap<(ChannelKind, BreakerState), u32> = HashMap::new();
    for (name, state) in states {
        let channel = name.split(':').nth(1).and_then(|c| c.parse().ok());
        if let Some(channel) = channel {
            *counts.entry((channel, state)).or_default() += 1;
        }
    }
    for channel in ChannelKind::ALL {
        for state in [BreakerState::Open, BreakerState::HalfOpen] {
            let n = counts.get(&(channel, state)).copied().unwrap_or(0);
            metrics::gauge!("outbound_breakers", "channel" => channel.as_str(), "state" => state.as_str())
                .set(f64::from(n));
        }
    }
    Ok(())
}

/// Refreshes the gauges every [`GAUGE_INTERVAL`] until `token` is cancelled.
pub fn spawn_gauges(deps: Deps, token: CancellationToken, tracker: &TaskTracker) {
    let threshold = deps.dispatch.settings().breaker.threshold;
    periodic::every(
        "breaker gauges",
        GAUGE_INTERVAL,
        &token,
        tracker,
        move || {
            let redis = deps.redis.clone();
            async move { refresh_gauges(&redis, threshold).await }
        },
    );
}
