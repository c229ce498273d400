//! Whether the relay publishes, or rests while Redis does not take a publish: the outage is
//! logged when it begins and when it ends, and Redis is asked again after a pause that
//! doubles from 100 ms up to 1 s.

use std::time::Duration;
use switchboard_domain::backoff::Backoff;
use tokio::time::Instant;

/// After a failed publish, the pause before Redis is asked again: 100 ms, doubling with each
/// failure in a row, up to 1 s (exact: one relay per pod, nothing to spread).
pub(super) const RETRY: Backoff =
    Backoff::new(Duration::from_millis(100), Duration::from_secs(1)).exact();

/// Whether the relay publishes, or rests because Redis did not take a publish.
#[derive(Debug, Default)]
pub(super) struct Pause {
    /// When publishing stopped; `None` while it works.
    pub(super) since: Option<Instant>,
    /// Failed tries in a row (publishes and probes); each doubles the pause.
    pub(super) failures: u32,
    /// When Redis is asked again.
    pub(super) retry_at: Option<Instant>,
    /// Tries while paused, and events served from the log, for the line that ends it.
    pub(super) retries: u64,
    pub(super) served: u64,
}

impl Pause {
    pub(super) fn paused(&self) -> bool {
        self.since.is_some()
    }

    /// A publish or a probe failed: the outage begins (logged once) or goes on (counted).
    pub(super) fn failed(&mut self, now: Instant, error: &dyn std::fmt::Display) {
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(now + RETRY.delay(self.failures));
        if self.since.is_some() {
            tracing::debug!(%error, failures = self.failures, "realtime: Redis still away");
            return;
        }
        self.since = Some(now);
        metrics::gauge!("realtime_relay_paused").set(1.0);
        tracing::warn!(
            %error,
            "realtime: Redis did not take a publish; the relay stops publishing and asks \
             Redis again every second at most, and each pod serves its own sockets from the \
             event log until Redis returns"
        );
    }

    /// Redis answered and nothing failed since: the relay publishes again (logged once).
    pub(super) fn recovered(&mut self, now: Instant) {
        let Some(since) = self.since else {
            return;
        };
        metrics::gauge!("realtime_relay_paused").set(0.0);
        tracing::info!(
            after = ?now.duration_since(since),
            retries = self.retries,
            served_from_log = self.served,
            "realtime: Redis answers again; the relay publishes what waited"
        );
        *self = Pause::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_100_ms_up_to_1_s() {
        let pauses: Vec<u128> = (1..=7).map(|n| RETRY.delay(n).as_millis()).collect();
        assert_eq!(pauses, vec![100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(RETRY.delay(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn an_outage_begins_once_and_ends_once() {
        let mut pause = Pause::default();
        let t0 = Instant::now();
        pause.failed(t0, &"refused");
        assert!(pause.paused());
        assert_eq!(pause.retry_at, Some(t0 + Duration::from_millis(100)));
        pause.failed(t0, &"refused");
        assert_eq!((pause.since, pause.failures), (Some(t0), 2));
        pause.recovered(t0 + Duration::from_secs(1));
        assert!(!pause.paused());
        assert_eq!((pause.failures, pause.retry_at), (0, None));
    }
}
