//! An admin's retry of a dead letter: the row handed back to the `channel-outbound` job at
//! once, with its event and its audit row in one transaction (the hand-back itself is the
//! dead-letter job's, `crate::periodic::dead_letters`).

use crate::Deps;
use crate::periodic::dead_letters::{after_retry, retry_now};
use serde_json::json;
use switchboard_domain::DeadLetterStatus;
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor};
use switchboard_store::dead_letters::{self, DeadLetter};

/// Why a retry was refused.
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    /// It is being retried already, or was resolved: its status now.
    #[error("the dead letter is {0}; only queued or dead ones can be retried")]
    NotRetryable(DeadLetterStatus),
    /// It is gone.
    #[error("no such dead letter")]
    NotFound,
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Hands `letter` (as the caller read it) back to the dispatch job now; the row afterwards.
pub async fn retry(
    deps: &Deps,
    actor: Actor<'_>,
    letter: &DeadLetter,
) -> Result<DeadLetter, RetryError> {
    let mut tx = deps.begin().await?;
    let Some(requeued) = retry_now(&mut tx, letter.id).await? else {
        tx.rollback().await.map_err(StoreError::from)?;
        let now = dead_letters::get(&deps.db, letter.id).await?;
        let status = now.map_or(letter.status, |l| l.status);
        return Err(RetryError::NotRetryable(status));
    };
    let details = json!({"outbox_id": requeued.outbox_id, "previous_status": letter.status});
    let target = Some(("dead_letter", letter.id));
    audit::record(&mut *tx, actor, "dead_letter.retry", target, details).await?;
    crate::commit(tx).await?;
    after_retry(&deps.dead_letters(), &requeued).await;
    dead_letters::get(&deps.db, letter.id)
        .await?
        .ok_or(RetryError::NotFound)
}
