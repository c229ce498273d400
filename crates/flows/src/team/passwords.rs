//! A user's password: changed by the user (who proved the current one), or set through a
//! mailed reset link. Either way the user's token version is bumped in the transaction that
//! stores the hash, so every session from before ends (REST at the next request, sockets
//! at once on every pod).
//!
//! A reset request must not tell who has an account: it reads the user and writes its
//! audit row whatever the address, and mails the link after the answer (on the pod's task
//! tracker), so the answer takes the same time.

use super::{Team, TeamError, own};
use serde_json::json;
use switchboard_channels::system_mail::Mail;
use switchboard_store::audit::{self, Actor};
use switchboard_store::invitations::{new_token, token_hash};
use switchboard_store::password_resets::{self, Refusal};
use switchboard_store::users::{self, User};
use uuid::Uuid;

/// How long a reset link works.
const RESET_TTL: chrono::Duration = chrono::Duration::hours(1);

/// Stores `new_hash` as `user_id`'s password, only over the password whose token version
/// the caller read (`read_version`) when it checked the current one: a reset or another
/// change that committed meanwhile is not undone. The user and their new token version.
pub async fn change(
    team: Team<'_>,
    request_id: Option<&str>,
    user_id: Uuid,
    new_hash: &str,
    read_version: i64,
) -> Result<(User, i64), TeamError> {
    let tx = team.deps.begin().await?;
    let stored = NewPassword {
        user_id,
        hash: new_hash,
        over: Some(read_version),
        action: "auth.password_changed",
    };
    let version = store(team, tx, request_id, stored)
        .await?
        .ok_or(TeamError::PasswordChanged)?;
    let user = users::get(&team.deps.db, user_id)
        .await?
        .ok_or(TeamError::UserGone)?;
    Ok((user, version))
}

/// A reset asked for `email` (lower case), whose hash names it in the audit row. `allowed`
/// is false once the address is over its reset limit: no link then, the answer the same.
#[derive(Debug, Clone, Copy)]
pub struct ResetAsked<'a> {
    /// The address given.
    pub email: &'a str,
    /// Its SHA-256, hex: the audit row never holds an address nobody proved is theirs.
    pub email_sha256: &'a str,
    /// Under the address's limit.
    pub allowed: bool,
}

/// Makes a reset link for the active user of `asked.email`, if there is one and the limit
/// allows, and mails it after the answer; audited either way.
pub async fn request_reset(
    team: Team<'_>,
    request_id: Option<&str>,
    asked: ResetAsked<'_>,
) -> Result<(), TeamError> {
    let found = users::find_for_login(&team.deps.db, asked.email).await?;
    let target = found.filter(|r| asked.allowed && !r.deactivated);
    let mut tx = team.deps.begin().await?;
    let token = match &target {
        Some(record) => {
            let (token, hash) = new_token();
            let expires_at = chrono::Utc::now() + RESET_TTL;
            password_resets::create(&mut *tx, record.user.id, &hash, expires_at).await?;
            Some(token)
        }
        None => None,
    };
    audit::record(
        &mut *tx,
        Actor {
            org_id: None,
            user_id: target.as_ref().map(|r| r.user.id),
            request_id,
        },
        "auth.password_reset_requested",
        target.as_ref().map(|r| ("user", r.user.id)),
        json!({"email_sha256": asked.email_sha256, "link_sent": token.is_some()}),
    )
    .await?;
    crate::commit(tx).await?;
    if let (Some(record), Some(token)) = (target, token) {
        let link = team.console_link(&format!("reset/{token}"));
        let mail = Mail {
            to: record.user.email,
            subject: "Reset your Switchboard password".into(),
            text: format!(
                "Someone (we hope you) asked to reset the password of your Switchboard account.\n\n\
                 Set a new password here (the link works once, within an hour):\n{link}\n\n\
                 If you did not ask, ignore this mail: your password stays as it is."
            ),
            html: None,
        };
        let mailer = team.mailer.clone();
        // After the answer: a send's duration would tell who has an account.
        team.tasks.spawn(async move {
            if !mailer.is_configured() {
                tracing::warn!("system mail is not configured: a password reset link was not sent");
            } else if let Err(e) = mailer.send(&mail).await {
                tracing::warn!(error = %e, "could not send a password reset link");
            }
        });
    }
    Ok(())
}

/// Sets `new_hash` as the password of the user whose reset link `token` is, using the link
/// up and ending every session of theirs.
pub async fn confirm_reset(
    team: Team<'_>,
    request_id: Option<&str>,
    token: &str,
    new_hash: &str,
) -> Result<(), TeamError> {
    let mut tx = team.deps.begin().await?;
    let user_id = password_resets::take(&mut tx, &token_hash(token))
        .await?
        .map_err(TeamError::Reset)?;
    let stored = NewPassword {
        user_id,
        hash: new_hash,
        over: None,
        action: "auth.password_reset",
    };
    store(team, tx, request_id, stored)
        .await?
        .ok_or(TeamError::Reset(Refusal::Unknown))?;
    Ok(())
}

/// A password to store, and the audit action that says how it came.
struct NewPassword<'a> {
    user_id: Uuid,
    hash: &'a str,
    /// The token version it must replace, if the caller read one.
    over: Option<i64>,
    action: &'static str,
}

/// Stores `new` in `tx` with its audit row, commits, and closes the user's sockets; the
/// new token version, `None` when the user is gone or their version moved past `new.over`
/// (nothing is written then).
async fn store(
    team: Team<'_>,
    mut tx: crate::Tx,
    request_id: Option<&str>,
    new: NewPassword<'_>,
) -> Result<Option<i64>, TeamError> {
    let user_id = new.user_id;
    let Some(version) = users::set_password(&mut *tx, user_id, new.hash, new.over).await? else {
        return Ok(None);
    };
    let target = Some(("user", user_id));
    let details = json!({"token_version": version});
    audit::record(
        &mut *tx,
        own(user_id, request_id),
        new.action,
        target,
        details,
    )
    .await?;
    crate::commit(tx).await?;
    team.sessions.disconnect_user(user_id).await;
    Ok(Some(version))
}
