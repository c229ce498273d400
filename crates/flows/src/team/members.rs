//! An org's members as its admins change them. Every change that could take the org's last
//! active admin away locks the org's row first (`org_members::lock_org`), so two admins
//! acting at once cannot both pass the check; a deactivation or a removal bumps the
//! member's token version with the change, so every token of theirs stops working with it.

use super::{Team, TeamError};
use crate::{Deps, Tx};
use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_store::audit::{self, Actor};
use switchboard_store::org_members::{self, OrgMember};
use switchboard_store::users;
use uuid::Uuid;

/// Refuses when `user_id` is `org_id`'s last active admin, under the org's lock.
async fn keep_an_admin(tx: &mut Tx, org_id: Uuid, user_id: Uuid) -> Result<(), TeamError> {
    org_members::lock_org(tx, org_id).await?;
    if org_members::is_last_admin(tx, org_id, user_id).await? {
        return Err(TeamError::LastAdmin);
    }
    Ok(())
}

/// Writes the audit row of a change to member `user_id`, reads them back and commits.
async fn audited(
    mut tx: Tx,
    actor: Actor<'_>,
    action: &str,
    (org_id, user_id): (Uuid, Uuid),
    details: Value,
) -> Result<OrgMember, TeamError> {
    audit::record(&mut *tx, actor, action, Some(("user", user_id)), details).await?;
    let member = org_members::get(&mut *tx, org_id, user_id)
        .await?
        .ok_or(TeamError::NotMember)?;
    crate::commit(tx).await?;
    Ok(member)
}

/// Gives member `user_id` of `org_id` `role` (in effect at their next request).
pub async fn change_role(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    user_id: Uuid,
    role: Role,
) -> Result<OrgMember, TeamError> {
    let mut tx = deps.begin().await?;
    org_members::lock_org(&mut tx, org_id).await?;
    if role != Role::Admin && org_members::is_last_admin(&mut tx, org_id, user_id).await? {
        return Err(TeamError::LastAdmin);
    }
    let Some(was) = org_members::set_role(&mut *tx, org_id, user_id, role).await? else {
        return Err(TeamError::NotMember);
    };
    let details = json!({"from": was, "to": role});
    audited(
        tx,
        actor,
        "org_member.role_changed",
        (org_id, user_id),
        details,
    )
    .await
}

/// Deactivates member `user_id` in `org_id`: their tokens are revoked and their sockets
/// closed on every pod.
pub async fn deactivate(
    team: Team<'_>,
    actor: Actor<'_>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<OrgMember, TeamError> {
    let mut tx = team.deps.begin().await?;
    keep_an_admin(&mut tx, org_id, user_id).await?;
    if !org_members::deactivate(&mut *tx, org_id, user_id).await? {
        return Err(TeamError::NotMember);
    }
    let member = audited(
        tx,
        actor,
        "org_member.deactivated",
        (org_id, user_id),
        json!({}),
    );
    let member = member.await?;
    team.sessions.disconnect_user(user_id).await;
    Ok(member)
}

/// Lets member `user_id` back into `org_id` (they log in again).
pub async fn reactivate(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<OrgMember, TeamError> {
    let mut tx = deps.begin().await?;
    if !org_members::reactivate(&mut *tx, org_id, user_id).await? {
        return Err(TeamError::NotMember);
    }
    audited(
        tx,
        actor,
        "org_member.reactivated",
        (org_id, user_id),
        json!({}),
    )
    .await
}

/// Removes member `user_id` from `org_id`: every token of theirs is revoked (they log in
/// again for their other orgs) and their sockets closed on every pod.
pub async fn remove(
    team: Team<'_>,
    actor: Actor<'_>,
    org_id: Uuid,
    user_id: Uuid,
) -> Result<(), TeamError> {
    let mut tx = team.deps.begin().await?;
    keep_an_admin(&mut tx, org_id, user_id).await?;
    if !users::remove_member(&mut *tx, org_id, user_id).await? {
        return Err(TeamError::NotMember);
    }
    let target = Some(("user", user_id));
    audit::record(&mut *tx, actor, "org_member.removed", target, json!({})).await?;
    crate::commit(tx).await?;
    team.sessions.disconnect_user(user_id).await;
    Ok(())
}
