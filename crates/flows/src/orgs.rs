//! An org's settings as its admins change them (the time zone its reports are cut in, the
//! account manager's address, the SLA, the retention window): the change and its audit row
//! in one transaction.

use crate::Deps;
use serde_json::json;
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor};
use switchboard_store::orgs::{self, OrgSettings, SettingsChange};
use uuid::Uuid;

/// Why a change was refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// No such org.
    #[error("no such org")]
    NotFound,
    /// Postgres.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Applies `change` (validated by the caller) to `org_id`'s settings; the settings now.
pub async fn update_settings(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    change: &SettingsChange<'_>,
) -> Result<OrgSettings, SettingsError> {
    let mut tx = deps.begin().await?;
    let org = orgs::update_settings(&mut *tx, org_id, change)
        .await?
        .ok_or(SettingsError::NotFound)?;
    let details = json!({
        "time_zone": change.time_zone,
        "account_manager_email": change.account_manager_email,
        "sla_minutes": change.sla_minutes,
        "retention_days": change.retention_days,
    });
    audit::record(&mut *tx, actor, "org.settings_updated", None, details).await?;
    crate::commit(tx).await?;
    Ok(org)
}
