//! Holding a Postgres lease while slow work runs (an agent call, a provider call). A row is
//! claimed with `locked_until = now() + lease`; renewing it every third of the lease keeps a
//! slow call's row held, while the row of a pod that died is free again within one lease.
//! The inbound job (inbox events), the outbound job (outbox rows) and the realtime relay
//! (its one-at-a-time lease) share this loop.

use std::time::Duration;

/// Runs `work`, calling `renew` every third of `lease` until it finishes. `renew` reports
/// its own failures: a lost renewal only shortens the hold, the work still finishes.
pub async fn hold<T, R, F>(lease: Duration, mut renew: R, work: impl Future<Output = T>) -> T
where
    R: FnMut() -> F,
    F: Future<Output = ()>,
{
    let every = (lease / 3).max(Duration::from_millis(100));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tick.tick() => renew().await,
        }
    }
}
