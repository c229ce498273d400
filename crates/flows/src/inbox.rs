//! An admin's replay of an accepted webhook event (`inbound_events`): unparked and due
//! again, audited, and pushed to the same idempotent `channel-inbound` job.

use crate::Deps;
use serde_json::json;
use switchboard_jobs::queue::InboundQueue;
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor};
use switchboard_store::inbox::{self, Replay};
use uuid::Uuid;

/// Why a replay was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Processed already: running its job again would change nothing.
    #[error("this event is processed; running its job again would change nothing")]
    AlreadyProcessed,
    /// No such event.
    #[error("no such inbound event")]
    NotFound,
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Replays event `id`; `inbound` takes the job (without Redis the sweeper enqueues it: it
/// is unparked and due now).
pub async fn replay(
    deps: &Deps,
    inbound: &InboundQueue,
    actor: Actor<'_>,
    id: Uuid,
) -> Result<(), ReplayError> {
    match inbox::replay(&deps.db, id).await? {
        Replay::Ready => {}
        Replay::AlreadyProcessed => return Err(ReplayError::AlreadyProcessed),
        Replay::Missing => return Err(ReplayError::NotFound),
    }
    let target = Some(("inbound_event", id));
    audit::record(&deps.db, actor, "inbound_event.replayed", target, json!({})).await?;
    if let Err(e) = inbound.push_events(&[id]).await {
        tracing::warn!(event_id = %id, error = %e, "replay enqueue failed; the inbox sweeper will pick it up");
    }
    Ok(())
}
