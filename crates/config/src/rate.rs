//! Rate-limit settings: `<n>/<period>` (`600/min`, `10/15min`, `5/s`) or `off`.

use std::time::Duration;

/// A rate: `limit` requests per `period`, all of them allowed at once (burst = limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSpec {
    /// Requests per period.
    pub limit: u64,
    /// The period.
    pub period: Duration,
}

/// Why a rate setting was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// Not `<n>/<period>` with a known unit.
    #[error("must be <n>/<period> (e.g. 600/min, 10/15min, 5/s) or off")]
    Shape,
    /// A limit or a period of zero.
    #[error("needs a limit and a period above zero")]
    Zero,
}

/// Parses a rate setting; `Ok(None)` for `off`.
pub fn parse_rate(spec: &str) -> Result<Option<RateSpec>, RateError> {
    let spec = spec.trim();
    if spec.eq_ignore_ascii_case("off") || spec.is_empty() {
        return Ok(None);
    }
    let bad = || RateError::Shape;
    let (limit, period) = spec.split_once('/').ok_or_else(bad)?;
    let limit: u64 = limit.trim().parse().map_err(|_| bad())?;
    let period = period.trim();
    let digits = period.chars().take_while(char::is_ascii_digit).count();
    let (count, unit) = period.split_at(digits);
    let count: u64 = if count.is_empty() {
        1
    } else {
        count.parse().map_err(|_| bad())?
    };
    per(limit, crate::env::unit_times(unit, count).ok_or_else(bad)?)
}

fn per(limit: u64, period: Duration) -> Result<Option<RateSpec>, RateError> {
    if limit == 0 || period.is_zero() {
        return Err(RateError::Zero);
    }
    Ok(Some(RateSpec { limit, period }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        assert_eq!(
            parse_rate("600/min"),
            Ok(Some(RateSpec {
                limit: 600,
                period: Duration::from_secs(60)
            }))
        );
        assert_eq!(
            parse_rate("10/15min").map(|r| r.map(|r| r.period)),
            Ok(Some(Duration::from_secs(900)))
        );
        assert_eq!(parse_rate("off"), Ok(None));
        for bad in ["10", "x/min", "10/fortnight", "0/min", "10/0s"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}
