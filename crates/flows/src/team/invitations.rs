//! Inviting people into an org. The invitation commits with its audit row; its link
//! `{PUBLIC_BASE_URL}/#/accept/<token>` is mailed after the commit and returned either way
//! (a failed or unconfigured send loses nothing: the admin copies it). Accepting makes the
//! invitee a member, as a new user or with the account they proved is theirs, in one
//! transaction with its audit row.

use super::{Team, TeamError};
use crate::Deps;
use chrono::Utc;
use serde_json::json;
use switchboard_channels::system_mail::Mail;
use switchboard_domain::Role;
use switchboard_store::audit::{self, Actor};
use switchboard_store::invitations::{self, Invitation};
use switchboard_store::users::{self, LoginRecord};
use switchboard_store::{StoreError, org_members, orgs};
use uuid::Uuid;

/// How long an invitation link works.
const INVITATION_TTL: chrono::Duration = chrono::Duration::days(7);

/// Whether the invitation mail went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mailed {
    /// The transport took it.
    Sent,
    /// The transport refused it or could not be reached.
    Failed,
    /// No system mail is configured.
    NotConfigured,
}

/// An invitation made, with its link (shown once: only its hash is stored).
#[derive(Debug)]
pub struct Invited {
    /// The invitation.
    pub invitation: Invitation,
    /// The link to give the invitee.
    pub link: String,
    /// Whether it was mailed.
    pub mail: Mailed,
}

/// Invites `email` (lower case, checked by the caller) into `actor`'s org `org_id` with
/// `role`, replacing an open invitation for the same address.
pub async fn invite(
    team: Team<'_>,
    actor: Actor<'_>,
    org_id: Uuid,
    invited_by: Uuid,
    email: &str,
    role: Role,
) -> Result<Invited, TeamError> {
    let mut tx = team.deps.begin().await?;
    if org_members::find_by_email(&mut *tx, org_id, email)
        .await?
        .is_some()
    {
        return Err(TeamError::AddressIsMember);
    }
    let (token, hash) = invitations::new_token();
    let expires_at = Utc::now() + INVITATION_TTL;
    let invitation =
        invitations::create(&mut tx, org_id, email, role, invited_by, &hash, expires_at).await?;
    audit::record(
        &mut *tx,
        actor,
        "invitation.created",
        Some(("invitation", invitation.id)),
        json!({"role": role, "email": email, "expires_at": invitation.expires_at}),
    )
    .await?;
    crate::commit(tx).await?;
    let link = team.console_link(&format!("accept/{token}"));
    let mail = send_invitation(team, &invitation, &link).await;
    Ok(Invited {
        invitation,
        link,
        mail,
    })
}

/// Sends the invitation once; the invitation stands whatever happens here.
async fn send_invitation(team: Team<'_>, invitation: &Invitation, link: &str) -> Mailed {
    if !team.mailer.is_configured() {
        return Mailed::NotConfigured;
    }
    let org_name = match orgs::get(&team.deps.db, invitation.org_id).await {
        Ok(Some(org)) => org.name,
        _ => "Switchboard".into(),
    };
    let mail = Mail {
        to: invitation.email.clone(),
        subject: format!("You are invited to {org_name} on Switchboard"),
        text: format!(
            "You are invited to join {org_name} on Switchboard as {role}.\n\n\
             Accept here (the link works once, until {expires}):\n{link}\n",
            role = invitation.role.as_str(),
            expires = invitation.expires_at.format("%Y-%m-%d %H:%M UTC"),
        ),
        html: None,
    };
    match team.mailer.send(&mail).await {
        Ok(_) => Mailed::Sent,
        Err(e) => {
            tracing::warn!(error = %e, invitation = %invitation.id, "could not send an invitation");
            Mailed::Failed
        }
    }
}

/// Revokes pending invitation `invitation_id` of `org_id`: its link no longer works.
pub async fn revoke(
    deps: &Deps,
    actor: Actor<'_>,
    org_id: Uuid,
    invitation_id: Uuid,
) -> Result<(), TeamError> {
    let mut tx = deps.begin().await?;
    if invitations::revoke(&mut *tx, org_id, invitation_id)
        .await?
        .is_none()
    {
        return Err(TeamError::NoInvitation);
    }
    let target = Some(("invitation", invitation_id));
    audit::record(&mut *tx, actor, "invitation.revoked", target, json!({})).await?;
    crate::commit(tx).await?;
    Ok(())
}

/// Who accepts an invitation.
#[derive(Debug)]
pub enum Joining<'a> {
    /// The user of the invited address, who proved the account is theirs.
    Existing(Uuid),
    /// Someone new: their account is made with the invitation's address.
    New {
        /// The hash of the password they chose.
        password_hash: &'a str,
        /// Their name, if they gave one.
        display_name: Option<&'a str>,
    },
}

/// Makes `joining` a member of `invitation`'s org with its role (the caller found it
/// pending); the member as login knows them, for their token.
pub async fn accept(
    deps: &Deps,
    request_id: Option<&str>,
    invitation: &Invitation,
    joining: Joining<'_>,
) -> Result<LoginRecord, TeamError> {
    let mut tx = deps.begin().await?;
    let new_user = matches!(joining, Joining::New { .. });
    let user_id = match joining {
        Joining::Existing(id) => id,
        Joining::New {
            password_hash,
            display_name,
        } => {
            users::insert(&mut *tx, &invitation.email, password_hash, display_name)
                .await?
                .ok_or(TeamError::AccountJustMade)?
                .id
        }
    };
    if !invitations::accept(&mut *tx, invitation.id, user_id).await? {
        return Err(TeamError::InvitationUsed);
    }
    if !org_members::add(&mut *tx, invitation.org_id, user_id, invitation.role).await? {
        return Err(TeamError::AlreadyMember);
    }
    audit::record(
        &mut *tx,
        Actor {
            org_id: Some(invitation.org_id),
            user_id: Some(user_id),
            request_id,
        },
        "invitation.accepted",
        Some(("invitation", invitation.id)),
        json!({"role": invitation.role, "new_user": new_user}),
    )
    .await?;
    crate::commit(tx).await?;
    users::find_for_login(&deps.db, &invitation.email)
        .await?
        .ok_or_else(|| StoreError::Unexpected("accepted user gone".into()).into())
}
