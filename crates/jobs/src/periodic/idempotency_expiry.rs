//! `idempotency-expiry`: Idempotency-Keys and their stored answers go once older than
//! `IDEMPOTENCY_TTL_HOURS`.

use crate::scheduler::{Job, JobError, Run};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::JobName;
use switchboard_store::{PgPool, idempotency};

/// Deletes Idempotency-Keys (and their stored answers) older than `ttl`.
pub struct IdempotencyExpiry {
    /// Postgres.
    pub db: PgPool,
    /// How long keys are kept (at least 24 h).
    pub ttl: Duration,
}

#[async_trait]
impl Job for IdempotencyExpiry {
    fn name(&self) -> JobName {
        JobName::IdempotencyExpiry
    }

    async fn run(&self, _: &Run) -> Result<Value, JobError> {
        let expired = idempotency::expire(&self.db, self.ttl).await?;
        Ok(json!({"expired": expired}))
    }
}
