//! Schedules: a cron expression (with seconds) or a fixed interval aligned on the Unix epoch.
//! Every pod computes the same slots for the same moment, which is what lets them race for
//! one `cron_runs` row per slot. A job read in the orgs' time zones has the union of its
//! slots in each zone; a slot covers the zones in which it is an occurrence.

use chrono::{DateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use std::str::FromStr;
use std::time::Duration;
use switchboard_domain::slot::slot_of;

/// When a job runs.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A cron expression (`sec min hour day-of-month month day-of-week [year]`).
    Cron(Box<cron::Schedule>),
    /// Every so long, slots aligned on the epoch (`@every 15s`); for sub-second test runs
    /// and the sweepers' older interval settings.
    Every(Duration),
}

/// Why a schedule does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is neither a cron expression (sec min hour dom month dow) nor @every <n>ms|s|m|h")]
pub struct BadSchedule(pub String);

impl FromStr for Schedule {
    type Err = BadSchedule;

    fn from_str(spec: &str) -> Result<Self, BadSchedule> {
        let bad = || BadSchedule(spec.to_owned());
        let spec = spec.trim();
        if let Some(every) = spec.strip_prefix("@every") {
            let every = every.trim();
            let digits = every.chars().take_while(char::is_ascii_digit).count();
            let (n, unit) = every.split_at(digits);
            let n: u64 = n.parse().map_err(|_| bad())?;
            let d = match unit {
                "ms" => Duration::from_millis(n),
                "s" => Duration::from_secs(n),
                "m" => Duration::from_secs(n * 60),
                "h" => Duration::from_secs(n * 3600),
                _ => return Err(bad()),
            };
            if d < Duration::from_millis(100) {
                return Err(bad());
            }
            return Ok(Schedule::Every(d));
        }
        let fields = spec.split_whitespace().count();
        let full = match fields {
            5 => format!("0 {spec}"),
            6 | 7 => spec.to_owned(),
            _ => return Err(bad()),
        };
        cron::Schedule::from_str(&full)
            .map(|s| Schedule::Cron(Box::new(s)))
            .map_err(|_| bad())
    }
}

fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_nanosecond(0).unwrap_or(t)
}

impl Schedule {
    /// The latest slot at or before `now`, read in zone `tz`.
    pub fn latest_in(&self, now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Every(d) => Some(slot_of(now, *d)),
            Schedule::Cron(c) => {
                let local = whole_second(now).with_timezone(&tz);
                if c.includes(local) {
                    return Some(local.with_timezone(&Utc));
                }
                c.after(&local).next_back().map(|t| t.with_timezone(&Utc))
            }
        }
    }

    /// The first slot strictly after `t`, read in zone `tz`.
    pub fn next_in(&self, t: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Every(d) => {
                let step = chrono::Duration::from_std(*d).ok()?;
                Some(slot_of(t, *d) + step)
            }
            Schedule::Cron(c) => c
                .after(&whole_second(t).with_timezone(&tz))
                .next()
                .map(|t| t.with_timezone(&Utc)),
        }
    }

    /// The latest slot at or before `now` in any of `zones`.
    pub fn latest(&self, now: DateTime<Utc>, zones: &[Tz]) -> Option<DateTime<Utc>> {
        zones.iter().filter_map(|z| self.latest_in(now, *z)).max()
    }

    /// The first slot after `t` in any of `zones`.
    pub fn next(&self, t: DateTime<Utc>, zones: &[Tz]) -> Option<DateTime<Utc>> {
        zones.iter().filter_map(|z| self.next_in(t, *z)).min()
    }

    /// The zones in which `slot` is an occurrence.
    pub fn zones_of(&self, slot: DateTime<Utc>, zones: &[Tz]) -> Vec<Tz> {
        zones
            .iter()
            .copied()
            .filter(|z| self.latest_in(slot, *z) == Some(slot))
            .collect()
    }
}

/// UTC as a zone list, for jobs not read in the orgs' zones.
pub fn utc() -> Vec<Tz> {
    vec![Tz::UTC]
}

/// A whole-second UTC instant (tests and callers that build slots by hand).
pub fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or_else(Utc::now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_and_every_parse_and_step() {
        let s: Schedule = "0 0 8 * * *".parse().expect("cron");
        let now = Utc
            .with_ymd_and_hms(2026, 3, 2, 10, 0, 0)
            .single()
            .expect("t");
        let latest = s.latest_in(now, Tz::UTC).expect("latest");
        assert_eq!(
            latest,
            Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0)
                .single()
                .expect("t")
        );
        assert_eq!(s.latest_in(latest, Tz::UTC), Some(latest));
        let next = s.next_in(latest, Tz::UTC).expect("next");
        assert_eq!(
            next,
            Utc.with_ymd_and_hms(2026, 3, 3, 8, 0, 0)
                .single()
                .expect("t")
        );
        // 08:00 in Berlin (UTC+1 in March) is 07:00 UTC.
        let berlin = s.latest_in(now, Tz::Europe__Berlin).expect("berlin");
        assert_eq!(
            berlin,
            Utc.with_ymd_and_hms(2026, 3, 2, 7, 0, 0)
                .single()
                .expect("t")
        );
        let zones = [Tz::UTC, Tz::Europe__Berlin];
        assert_eq!(s.latest(now, &zones), Some(latest));
        assert_eq!(s.zones_of(berlin, &zones), vec![Tz::Europe__Berlin]);

        let never: Schedule = "0 0 0 1 1 * 2099".parse().expect("a year field");
        assert_eq!(never.latest_in(now, Tz::UTC), None);
        assert!(never.next_in(now, Tz::UTC).is_some());

        let five: Schedule = "*/5 * * * *".parse().expect("five fields");
        assert!(matches!(five, Schedule::Cron(_)));
        let every: Schedule = "@every 300ms".parse().expect("every");
        let t = at(10);
        assert_eq!(
            every.next_in(t, Tz::UTC),
            Some(t + chrono::Duration::milliseconds(200))
        );
        for bad in [
            "",
            "@every",
            "@every 5x",
            "@every 10ms",
            "1 2 3",
            "x * * * * *",
        ] {
            assert!(bad.parse::<Schedule>().is_err(), "{bad}");
        }
    }
}
