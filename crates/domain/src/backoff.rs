//! How long to wait before trying again, for every retry in the product: provider sends,
//! agent calls, fenced outbox writes, storing realtime events, restarting a queue worker,
//! and the retry times written to the inbox and outbox rows. One formula, so a reader of
//! SPEC §6 finds it in one place, and retry times are computed here rather than in SQL.

use rand::Rng;
use std::time::Duration;

/// `base × 2^(attempt − 1)`, capped at `max`; with jitter, each wait is drawn from ±50 % of
/// that so the retries of many rows (or pods) that failed together spread out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    jitter: bool,
}

impl Backoff {
    /// Doubling from `base`, never above `max`, with jitter.
    pub const fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max,
            jitter: true,
        }
    }

    /// The same waits without jitter: where the schedule is part of a contract (the agent's
    /// 1 s, 2 s, 4 s) or tests assert on it.
    pub const fn exact(self) -> Backoff {
        Backoff {
            jitter: false,
            ..self
        }
    }

    /// The wait before attempt `attempt + 1`, after `attempt` failures (1 → `base`), without
    /// jitter.
    pub fn nominal(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        self.base
            .saturating_mul(2u32.saturating_pow(exp))
            .min(self.max)
    }

    /// The wait after `attempt` failures, jittered unless [`Backoff::exact`].
    pub fn delay(&self, attempt: u32) -> Duration {
        let nominal = self.nominal(attempt);
        if self.jitter {
            nominal.mul_f64(rand::thread_rng().gen_range(0.5..1.5))
        } else {
            nominal
        }
    }

    /// [`Backoff::delay`] in seconds for attempts `1..=attempts`: for a statement that picks
    /// the wait by a count only the row knows (`$n[LEAST(count, len - 1) + 1]`).
    pub fn seconds_table(&self, attempts: u32) -> Vec<f64> {
        (1..=attempts.max(1))
            .map(|a| self.delay(a).as_secs_f64())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Backoff;
    use std::time::Duration;

    #[test]
    fn doubles_from_base_up_to_max() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5)).exact();
        let waits: Vec<u64> = (1..=5).map(|a| b.delay(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(b.delay(0), Duration::from_secs(1));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(5));
    }

    #[test]
    fn jitter_stays_within_half_either_side() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(60));
        for attempt in 1..=6 {
            let nominal = b.nominal(attempt).as_secs_f64();
            for _ in 0..50 {
                let got = b.delay(attempt).as_secs_f64();
                assert!(
                    got >= nominal * 0.5 && got <= nominal * 1.5,
                    "{attempt}: {got}"
                );
            }
        }
    }

    #[test]
    fn the_table_has_one_wait_per_attempt() {
        let b = Backoff::new(Duration::from_secs(2), Duration::from_secs(10)).exact();
        assert_eq!(b.seconds_table(4), [2.0, 4.0, 8.0, 10.0]);
        assert_eq!(b.seconds_table(0), [2.0]);
    }
}
