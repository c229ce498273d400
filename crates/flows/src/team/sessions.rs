//! A user's sessions: logging in (audited whatever the outcome), and the two ways a user
//! ends sessions, this token (its `jti` on the denylist until it expires) or every token
//! (the user's token version bumped). Both are rows in Postgres, committed with their audit
//! row, so they hold on every pod whatever Redis is doing.

use super::{Team, TeamError, own};
use crate::Deps;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::sync::LazyLock;
use switchboard_store::audit::{self, Actor};
use switchboard_store::users::{self, LoginRecord};
use uuid::Uuid;

/// A hash to verify against when the address is unknown, so a miss costs what a hit costs
/// and response time does not reveal which addresses exist.
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| users::hash_password("switchboard-timing-equaliser").unwrap_or_default());

/// What a login came to.
#[derive(Debug)]
pub enum LogIn {
    /// The right password of an active user.
    Accepted(LoginRecord),
    /// The right password of a deactivated user (only the right password learns that).
    Deactivated,
    /// An unknown address or a wrong password.
    Refused,
}

/// A login attempt for `email` (lower case; its hash `email_sha256` names it in the audit
/// row, never the address or the password). The caller holds a hashing turn: the password
/// is checked here, off the executor, against a dummy hash when the address is unknown.
pub async fn log_in(
    deps: &Deps,
    request_id: Option<&str>,
    email: &str,
    email_sha256: &str,
    password: String,
) -> Result<LogIn, TeamError> {
    let found = users::find_for_login(&deps.db, email).await?;
    let (record, ok) = tokio::task::spawn_blocking(move || match found {
        Some(record) => {
            let ok = users::verify_password(&password, &record.password_hash);
            (Some(record), ok)
        }
        None => {
            users::verify_password(&password, &DUMMY_HASH);
            (None, false)
        }
    })
    .await?;
    let deactivated = ok && record.as_ref().is_some_and(|r| r.deactivated);
    let user_id = record.as_ref().map(|r| r.user.id);
    let (outcome, details) = if deactivated {
        (
            "auth.login_failed",
            json!({"email_sha256": email_sha256, "reason": "deactivated"}),
        )
    } else if ok {
        ("auth.login", json!({"email_sha256": email_sha256}))
    } else {
        ("auth.login_failed", json!({"email_sha256": email_sha256}))
    };
    let actor = Actor {
        org_id: None,
        user_id,
        request_id,
    };
    let target = user_id.map(|id| ("user", id));
    if let Err(e) = audit::record(&deps.db, actor, outcome, target, details).await {
        tracing::warn!(error = %e, "could not audit a login");
    }
    Ok(match record {
        _ if deactivated => LogIn::Deactivated,
        Some(record) if ok => LogIn::Accepted(record),
        _ => LogIn::Refused,
    })
}

/// Revokes `user_id`'s token `jti` (until `expires_at`, its own expiry); their other
/// sessions go on.
pub async fn log_out(
    deps: &Deps,
    request_id: Option<&str>,
    user_id: Uuid,
    jti: Uuid,
    expires_at: DateTime<Utc>,
) -> Result<(), TeamError> {
    let mut tx = deps.begin().await?;
    users::revoke_token(&mut *tx, user_id, jti, expires_at).await?;
    let target = Some(("user", user_id));
    let details = json!({"jti": jti});
    audit::record(
        &mut *tx,
        own(user_id, request_id),
        "auth.logout",
        target,
        details,
    )
    .await?;
    crate::commit(tx).await?;
    Ok(())
}

/// Revokes every token `user_id` was issued so far, and closes their sockets at once where
/// Redis carries it (each pod's session check closes the rest regardless).
pub async fn log_out_everywhere(
    team: Team<'_>,
    request_id: Option<&str>,
    user_id: Uuid,
) -> Result<(), TeamError> {
    let mut tx = team.deps.begin().await?;
    let version = users::bump_token_version(&mut *tx, user_id).await?;
    let target = Some(("user", user_id));
    let details = json!({"token_version": version});
    let actor = own(user_id, request_id);
    audit::record(&mut *tx, actor, "auth.logout_all", target, details).await?;
    crate::commit(tx).await?;
    team.sessions.disconnect_user(user_id).await;
    Ok(())
}
