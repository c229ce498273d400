//! The fast duplicate filter for webhooks: `SET NX` with a TTL. Postgres stays the truth;
//! this only saves the database a round trip for the common retry.

use crate::{CoordError, Redis};
use std::time::Duration;

/// How long a seen key is remembered (providers retry for hours to days; Postgres covers
/// what Redis forgets).
pub const DEDUP_TTL: Duration = Duration::from_secs(24 * 3600);

fn key(redis: &Redis, scope: &str) -> String {
    redis.key(&format!("dedup:{scope}"))
}

/// Claims `dedup:{scope}` for each scope with one pipelined round trip; for each, `true`
/// when it is the first time it is seen (a scope repeated within `scopes` is claimed by its
/// first occurrence).
pub async fn claim_many(redis: &Redis, scopes: &[String]) -> Result<Vec<bool>, CoordError> {
    let mut pipe = redis::pipe();
    for scope in scopes {
        pipe.cmd("SET")
            .arg(key(redis, scope))
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(DEDUP_TTL.as_secs());
    }
    let set: Vec<Option<String>> = pipe.query_async(&mut redis.conn()).await?;
    Ok(set.into_iter().map(|s| s.is_some()).collect())
}

/// Forgets claims whose write did not happen, with one round trip, so the providers'
/// retries are not mistaken for duplicates.
pub async fn release_many(redis: &Redis, scopes: &[String]) -> Result<(), CoordError> {
    if scopes.is_empty() {
        return Ok(());
    }
    let mut del = redis::cmd("DEL");
    for scope in scopes {
        del.arg(key(redis, scope));
    }
    let _: i64 = del.query_async(&mut redis.conn()).await?;
    Ok(())
}
