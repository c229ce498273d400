//! Changes to an org's autopilot policy: set by an admin, paused by any admin (the kill
//! switch) or by the deployment (`AUTOPILOT=off`). Each is one transaction that locks the
//! org's policy, stores the new one and writes the audit row with what it replaced, so two
//! admins changing it at once leave an audit trail whose `before`s chain.

use serde_json::json;
use switchboard_domain::autopilot::{Invalid, Policy};
use switchboard_store::audit::{self, Actor};
use switchboard_store::{PgPool, StoreError, orgs};
use uuid::Uuid;

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// No such org.
    #[error("no such org")]
    NotFound,
    /// A field out of bounds.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for PolicyError {
    fn from(e: sqlx::Error) -> Self {
        PolicyError::Store(StoreError::from(e))
    }
}

/// Replaces the org's policy with `policy` (validated); the stored policy.
pub async fn set(
    db: &PgPool,
    actor: Actor<'_>,
    org_id: Uuid,
    policy: Policy,
) -> Result<Policy, PolicyError> {
    policy.validate()?;
    change(db, actor, org_id, "autopilot.updated", |_| policy).await
}

/// The kill switch: the policy off, its rules kept for when an admin turns it on again.
pub async fn pause(db: &PgPool, actor: Actor<'_>, org_id: Uuid) -> Result<Policy, PolicyError> {
    change(db, actor, org_id, "autopilot.paused", Policy::paused).await
}

async fn change(
    db: &PgPool,
    actor: Actor<'_>,
    org_id: Uuid,
    action: &str,
    next: impl FnOnce(Policy) -> Policy,
) -> Result<Policy, PolicyError> {
    let mut tx = db.begin().await?;
    let before = orgs::lock_autopilot(&mut tx, org_id)
        .await?
        .ok_or(PolicyError::NotFound)?;
    let after = next(before.clone());
    orgs::set_autopilot(&mut *tx, org_id, &after).await?;
    audit::record(
        &mut *tx,
        actor,
        action,
        Some(("org", org_id)),
        json!({"before": before, "after": after}),
    )
    .await?;
    tx.commit().await?;
    Ok(after)
}

/// `AUTOPILOT=off` at start: every org's policy off (audited per org); how many were on.
pub async fn pause_everywhere(db: &PgPool) -> Result<usize, StoreError> {
    Ok(orgs::pause_every_autopilot(db).await?.len())
}
