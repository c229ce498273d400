//! The fast duplicate filter for webhooks: `SET NX` with a TTL. Postgres stays the truth;
//! this only saves the database a round trip for the common retry.

use crate::{CoordError, Redis};
use std::time::Duration;

/// How long a seen key is remembered (providers retry for hours to days; Postgres covers
/// what Redis forgets).
pub const DEDUP_TTL: Duration = Duration::from_secs(24 * 3600);

/// Claims `dedup:{scope}`; `true` when this is the first time it is seen.
pub async fn claim(redis: &Redis, scope: &str) -> Result<bool, CoordError> {
    let mut conn = redis.conn();
    let set: Option<String> = redis::cmd("SET")
        .arg(redis.key(&format!("dedup:{scope}")))
        .arg(1)
        .arg("NX")
        .arg("EX")
        .arg(DEDUP_TTL.as_secs())
        .query_async(&mut conn)
        .await?;
    Ok(set.is_some())
}

/// Forgets a claim, when the write it guarded did not happen (so the provider's retry is
/// not mistaken for a duplicate).
pub async fn release(redis: &Redis, scope: &str) -> Result<(), CoordError> {
    let mut conn = redis.conn();
    let _: i64 = redis::cmd("DEL")
        .arg(redis.key(&format!("dedup:{scope}")))
        .query_async(&mut conn)
        .await?;
    Ok(())
}
