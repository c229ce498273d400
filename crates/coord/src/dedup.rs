//! The fast duplicate filter for webhooks. Postgres stays the truth; this only saves the
//! database a round trip for the common retry.
//!
//! A key is claimed *pending* (short-lived) before the inbox commit and promoted to *done*
//! (24 h) only once Postgres has the event. Only a done key answers "duplicate" without
//! asking Postgres: a pod killed between its claim and its commit, or a failed commit whose
//! release failed too, leaves a pending key, and a retry that finds one goes on to the
//! unique index, which tells whether the event really is stored. So no Redis key can ever
//! hide an event Postgres does not have.

use crate::{CoordError, Redis};
use std::time::Duration;

/// How long a stored event's key is remembered (providers retry for hours to days;
/// Postgres covers what Redis forgets).
pub const DEDUP_TTL: Duration = Duration::from_secs(24 * 3600);

/// How long a claim taken before the commit lives if it is never promoted nor released.
pub const PENDING_TTL: Duration = Duration::from_secs(120);

const PENDING: &str = "pending";
const DONE: &str = "done";

/// What the filter knows about one scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// First time: this caller holds the pending claim.
    New,
    /// Claimed by a request whose commit is in flight or never happened: only Postgres
    /// can tell (also any key an older build wrote).
    Pending,
    /// Committed in Postgres: a duplicate.
    Done,
}

/// The scope of one webhook event: its channel, connection and the provider's dedup key.
pub fn scope(channel: &str, connection_id: uuid::Uuid, dedup_key: &str) -> String {
    format!("{channel}:{connection_id}:{dedup_key}")
}

fn key(redis: &Redis, scope: &str) -> String {
    redis.key(&format!("dedup:{scope}"))
}

/// Claims `dedup:{scope}` as pending for each scope with one pipelined round trip (a scope
/// repeated within `scopes` is claimed by its first occurrence).
pub async fn claim_many(redis: &Redis, scopes: &[String]) -> Result<Vec<Seen>, CoordError> {
    let keys: Vec<String> = scopes.iter().map(|scope| key(redis, scope)).collect();
    let replies: Vec<Option<String>> = redis
        .pipeline_per_key(&keys, |pipe, key| {
            pipe.cmd("SET")
                .arg(key)
                .arg(PENDING)
                .arg("NX")
                .arg("EX")
                .arg(PENDING_TTL.as_secs())
                .cmd("GET")
                .arg(key);
        })
        .await?;
    Ok(replies
        .chunks(2)
        .map(|pair| match pair {
            [Some(_), _] => Seen::New,
            [None, Some(value)] if value == DONE => Seen::Done,
            _ => Seen::Pending,
        })
        .collect())
}

/// Marks scopes whose events Postgres now holds as done for [`DEDUP_TTL`], with one round
/// trip. Failing only costs later retries a trip to Postgres.
pub async fn confirm_many(redis: &Redis, scopes: &[String]) -> Result<(), CoordError> {
    if scopes.is_empty() {
        return Ok(());
    }
    let keys: Vec<String> = scopes.iter().map(|scope| key(redis, scope)).collect();
    let _: Vec<()> = redis
        .pipeline_per_key(&keys, |pipe, key| {
            pipe.cmd("SET")
                .arg(key)
                .arg(DONE)
                .arg("EX")
                .arg(DEDUP_TTL.as_secs())
                .ignore();
        })
        .await?;
    Ok(())
}

/// Forgets claims whose write did not happen, with one round trip, so the providers'
/// retries skip the trip to Postgres.
pub async fn release_many(redis: &Redis, scopes: &[String]) -> Result<(), CoordError> {
    delete_many(redis, scopes).await
}

/// Forgets the keys of an erased customer's events (they name the provider's message ids):
/// their tombstones in Postgres answer the retries from then on.
pub async fn forget_many(redis: &Redis, scopes: &[String]) -> Result<(), CoordError> {
    delete_many(redis, scopes).await
}

async fn delete_many(redis: &Redis, scopes: &[String]) -> Result<(), CoordError> {
    if scopes.is_empty() {
        return Ok(());
    }
    let keys: Vec<String> = scopes.iter().map(|scope| key(redis, scope)).collect();
    let _: Vec<()> = redis
        .pipeline_per_key(&keys, |pipe, key| {
            pipe.del(key).ignore();
        })
        .await?;
    Ok(())
}
