//! The subscription watchdog: every tick the pod compares what its adapter expects (the
//! channels it subscribed) with what Redis holds: `PUBSUB NUMSUB` per channel, and
//! `CLIENT INFO` (`sub=`) for its own connection — the request channel is shared by every
//! pod, so another pod's subscription would hide this one's loss from `NUMSUB` alone. A
//! shortfall raises an alert (`tracing::error!`, which Sentry turns into an event) and the
//! channels are subscribed again (`SUBSCRIBE` is idempotent). The outcome is what `/ready`
//! and `/metrics` report.
//!
//! The tick also drives reconnection: a command on a broken connection makes the
//! `ConnectionManager` reconnect and replay its subscriptions even when nothing is emitted.

use crate::driver::PubSubDriver;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long one check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the watchdog checks while it repairs after a lost connection.
const REPAIR_EVERY: Duration = Duration::from_millis(500);
/// How long after a lost connection it keeps checking that often.
const REPAIR_FOR: Duration = Duration::from_secs(30);

/// The adapter's health as last checked.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct AdapterHealth {
    /// True when every expected channel had a listener at the last check.
    pub ok: bool,
    /// Channels the adapter subscribed to.
    pub expected: usize,
    /// Of those, how many Redis reported with a listener.
    pub subscribed: usize,
    /// When the last check ran (`None` before the first).
    pub checked_at: Option<DateTime<Utc>>,
    /// Why the last check failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The last outcome, shared with the readiness probe and the relay.
#[derive(Debug, Default)]
pub(crate) struct HealthCell {
    health: RwLock<AdapterHealth>,
    /// The last check could not reach Redis: an outage is logged when it begins and when
    /// it ends, not at every tick in between.
    away: AtomicBool,
}

impl HealthCell {
    pub(crate) fn get(&self) -> AdapterHealth {
        self.health
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, health: AdapterHealth) {
        metrics::gauge!("realtime_adapter_up").set(if health.ok { 1.0 } else { 0.0 });
        metrics::gauge!("realtime_adapter_subscriptions", "state" => "expected")
            .set(health.expected as f64);
        metrics::gauge!("realtime_adapter_subscriptions", "state" => "present")
            .set(health.subscribed as f64);
        *self.health.write().unwrap_or_else(PoisonError::into_inner) = health;
    }
}

/// Runs one check: compares, alerts, re-subscribes, records.
pub(crate) async fn check(driver: &PubSubDriver, health: &HealthCell) {
    let expected = driver.channels();
    let probe = async {
        Ok::<_, redis::RedisError>((
            driver.numsub(&expected).await?,
            driver.own_subscriptions().await?,
        ))
    };
    let (counts, own) = match tokio::time::timeout(CHECK_TIMEOUT, probe).await {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return unreachable(health, expected.len(), e.to_string()),
        Err(_) => {
            return unreachable(
                health,
                expected.len(),
                "subscription check timed out".into(),
            );
        }
    };
    if health.away.swap(false, Ordering::Relaxed) {
        tracing::info!("realtime watchdog reaches Redis again");
    }
    let unheard: Vec<&String> = counts
        .iter()
        .filter(|(_, listeners)| *listeners < 1)
        .map(|(chan, _)| chan)
        .collect();
    let subscribed = own.min(expected.len());
    let intact = unheard.is_empty() && subscribed == expected.len();
    let mut error = None;
    if !intact {
        let missing = expected.len() - subscribed;
        metrics::counter!("realtime_subscriptions_lost_total").increment(missing.max(1) as u64);
        // The alert itself (`realtime_adapter_down`, once per window across pods) is raised
        // from this pod's health by the API's sampler.
        tracing::warn!(
            expected = expected.len(),
            subscribed,
            ?unheard,
            "realtime alert: this pod lost Redis pub/sub subscriptions; cross-pod events \
             are not reaching its sockets. Re-subscribing."
        );
        error = Some(format!(
            "{missing} of {} subscriptions were lost",
            expected.len()
        ));
        if let Err(e) = driver.resubscribe(&expected).await {
            metrics::counter!("realtime_adapter_errors_total", "op" => "resubscribe").increment(1);
            error = Some(format!("re-subscribe failed: {e}"));
        }
    }
    health.set(AdapterHealth {
        ok: intact,
        expected: expected.len(),
        subscribed,
        checked_at: Some(Utc::now()),
        error,
    });
}

fn unreachable(health: &HealthCell, expected: usize, error: String) {
    metrics::counter!("realtime_adapter_errors_total", "op" => "check").increment(1);
    if health.away.swap(true, Ordering::Relaxed) {
        tracing::debug!(%error, "realtime watchdog still cannot reach Redis");
    } else {
        tracing::warn!(%error, "realtime watchdog cannot reach Redis");
    }
    health.set(AdapterHealth {
        ok: false,
        expected,
        subscribed: 0,
        checked_at: Some(Utc::now()),
        error: Some(error),
    });
}

/// Checks every `interval` until `token` is cancelled.
pub(crate) fn spawn(
    driver: PubSubDriver,
    health: Arc<HealthCell>,
    interval: Duration,
    token: CancellationToken,
    tracker: &TaskTracker,
) {
    tracker.spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // After a lost connection, check every REPAIR_EVERY until the subscriptions hold
        // again (a cluster failover takes a few seconds), then back to the tick.
        let mut repairing_until: Option<tokio::time::Instant> = None;
        loop {
            let fast = repairing_until
                .filter(|until| tokio::time::Instant::now() < *until && !health.get().ok);
            tokio::select! {
                () = token.cancelled() => break,
                _ = tick.tick(), if fast.is_none() => {}
                () = tokio::time::sleep(REPAIR_EVERY), if fast.is_some() => {}
                () = driver.lost() => {
                    repairing_until = Some(tokio::time::Instant::now() + REPAIR_FOR);
                    tokio::time::sleep(REPAIR_EVERY).await;
                }
            }
            check(&driver, &health).await;
        }
    });
}
