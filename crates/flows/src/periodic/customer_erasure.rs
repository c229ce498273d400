//! Erasure of one customer (`POST /customers/{id}/erase`): the request handler runs it at
//! once, and the `customer-erasure` scheduled job (once per slot across pods, AA2) takes up
//! every erasure still pending: one whose pod died mid-way (its lease lapsed), one that
//! waited for a reply or an inbox event in flight, one that failed.
//!
//! An attempt: take the erasure's lease; forget the Redis dedup keys of the customer's
//! inbox events; run the one Postgres transaction (`customer_erasures::erase`); forget the
//! keys of events that arrived meanwhile; wake the relay for the `conversation_erased`
//! events. Each step may run again: a second DEL finds nothing, and the transaction commits
//! only while the erasure is pending. A key forgotten before a commit that never happens
//! costs a provider's retry a trip to Postgres, which still has the event.

use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use switchboard_coord::{Redis, dedup};
use switchboard_domain::faults::Faults;
use switchboard_domain::{Emitter, JobName};
use switchboard_jobs::scheduler::{Job, JobError, Run};
use switchboard_store::customer_erasures::{self, Deferred, Erased, InboxKey};
use switchboard_store::{PgPool, StoreError};
use uuid::Uuid;

/// Most erasures one slot takes up.
const BATCH: i64 = 20;

/// What runs erasures: the stores they clean and the relay they wake.
#[derive(Clone)]
pub struct CustomerErasure {
    /// Postgres.
    pub db: PgPool,
    /// The dedup keys.
    pub redis: Redis,
    /// Wakes the relay for the `conversation_erased` events.
    pub emitter: Arc<dyn Emitter>,
    /// How long an attempt holds the erasure (`ERASURE_LEASE_MS`).
    pub lease: Duration,
    /// Test-only fault injection.
    pub faults: Faults,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The customer is erased, now or by an earlier attempt.
    Done,
    /// Another attempt holds the erasure right now.
    Held,
    /// It waits for something in flight; the next slot tries again.
    Deferred(Deferred),
}

/// Why an attempt failed; the erasure stays pending and a later slot tries again.
#[derive(Debug, thiserror::Error)]
pub enum ErasureError {
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Redis.
    #[error(transparent)]
    Redis(#[from] switchboard_coord::CoordError),
}

fn scopes(keys: &[InboxKey]) -> Vec<String> {
    keys.iter()
        .map(|k| dedup::scope(&k.channel, k.connection_id, &k.dedup_key))
        .collect()
}

impl CustomerErasure {
    /// One attempt at erasure `id`, once its lease is taken.
    pub async fn attempt(&self, id: Uuid) -> Result<Attempt, ErasureError> {
        if !customer_erasures::claim(&self.db, id, self.lease).await? {
            return Ok(
                match customer_erasures::status(&self.db, id).await?.as_deref() {
                    Some("pending") => Attempt::Held,
                    _ => Attempt::Done,
                },
            );
        }
        self.attempt_held(id).await
    }

    /// One attempt at erasure `id`, whose lease the caller holds (it just requested it).
    pub async fn attempt_held(&self, id: Uuid) -> Result<Attempt, ErasureError> {
        let result = self.erase(id).await;
        match &result {
            Ok(Attempt::Done) => {}
            // Held by this attempt: handed back so the next slot need not wait for the lease.
            Ok(_) | Err(ErasureError::Redis(_)) => {
                customer_erasures::release(&self.db, id).await?;
            }
            // Postgres failed (or a test's fault, as a pod dying there): the lease runs out.
            Err(ErasureError::Store(_)) => {}
        }
        result
    }

    async fn erase(&self, id: Uuid) -> Result<Attempt, ErasureError> {
        let before = customer_erasures::inbox_keys(&self.db, id).await?;
        dedup::forget_many(&self.redis, &scopes(&before)).await?;
        match customer_erasures::erase(&self.db, id, &self.faults).await? {
            Erased::Done { counts, inbox } => {
                let late: Vec<InboxKey> =
                    inbox.into_iter().filter(|k| !before.contains(k)).collect();
                if let Err(error) = dedup::forget_many(&self.redis, &scopes(&late)).await {
                    // The keys expire with their TTL; the tombstones answer retries anyway.
                    tracing::warn!(%error, "could not forget the dedup keys of an erased customer's late events");
                }
                self.emitter.wake();
                metrics::counter!("customer_erasures_total").increment(1);
                tracing::info!(
                    erasure_id = %id,
                    messages = counts.messages,
                    conversations = counts.conversations,
                    "customer erased"
                );
                Ok(Attempt::Done)
            }
            Erased::AlreadyDone => Ok(Attempt::Done),
            Erased::Deferred(why) => {
                tracing::info!(erasure_id = %id, ?why, "customer erasure waits for work in flight");
                Ok(Attempt::Deferred(why))
            }
        }
    }
}

#[async_trait]
impl Job for CustomerErasure {
    fn name(&self) -> JobName {
        JobName::CustomerErasure
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let (mut done, mut waiting, mut failed) = (0, 0, 0);
        for id in customer_erasures::due(&self.db, BATCH).await? {
            match self.attempt(id).await {
                Ok(Attempt::Done) => done += 1,
                Ok(Attempt::Held | Attempt::Deferred(_)) => waiting += 1,
                Err(error) => {
                    failed += 1;
                    tracing::warn!(erasure_id = %id, %error, "customer erasure failed; a later slot retries it");
                }
            }
        }
        Ok(json!({"erased": done, "waiting": waiting, "failed": failed}))
    }
}
