//! Schedule slots: every pod computes the same slot for the same moment, so "once per slot"
//! can be claimed with one unique row per (job, slot) across all pods (AA2).

use chrono::{DateTime, TimeZone, Utc};
use std::time::Duration;

/// The start of the `interval`-long slot that `now` falls in (slots are aligned on the
/// Unix epoch).
pub fn slot_of(now: DateTime<Utc>, interval: Duration) -> DateTime<Utc> {
    let step = i64::try_from(interval.as_millis())
        .unwrap_or(i64::MAX)
        .max(1);
    let ms = now.timestamp_millis();
    Utc.timestamp_millis_opt(ms - ms.rem_euclid(step))
        .single()
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_align_on_the_interval() {
        let t = Utc.timestamp_millis_opt(10_250).single().expect("time");
        let slot = slot_of(t, Duration::from_millis(300));
        assert_eq!(slot.timestamp_millis(), 10_200);
        assert_eq!(slot_of(slot, Duration::from_millis(300)), slot);
    }
}
