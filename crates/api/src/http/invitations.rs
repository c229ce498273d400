//! Inviting people into an org. An admin invites an address with a role; the link
//! `{PUBLIC_BASE_URL}/#/accept/<token>` is mailed after the invitation commits, and shown to
//! the admin either way (a failed or unconfigured send loses nothing: they copy it). The
//! invitee accepts once, within seven days: a new user sets their password, someone who
//! already has an account proves it with their current one; either way they are logged in.
//! The password is checked here; the invitation, its mail and the membership are
//! `switchboard_flows::team::invitations`'.

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, RequestId};
use crate::http::auth::{LoginResponse, PasswordAttempt, hashing_turn};
use crate::http::passwords::{check_password, hash, limit_address};
use crate::state::AppState;
use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use switchboard_domain::Role;
use switchboard_flows::team::invitations::{self as flow, Joining, Mailed};
use switchboard_store::invitations::{self, Invitation, Standing};
use switchboard_store::users::{self, User};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// The longest email address there can be (RFC 5321 path limit).
const MAX_EMAIL_LEN: usize = 254;
/// The longest display name.
const MAX_DISPLAY_NAME: usize = 200;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(invite, list_invitations))
        .routes(routes!(revoke_invitation))
        .routes(routes!(preview_invitation))
        .routes(routes!(accept_invitation))
}

/// One address, plainly: `local@domain.tld`, nothing a mail header could misread.
pub(crate) fn plausible_email(address: &str) -> bool {
    let Some((local, domain)) = address.split_once('@') else {
        return false;
    };
    address.len() <= MAX_EMAIL_LEN
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !address.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';' | '"')
        })
}

fn parse_role(role: &str) -> ApiResult<Role> {
    role.parse()
        .map_err(|_| ApiError::validation("role must be `admin` or `expert`"))
}

#[derive(Deserialize, ToSchema)]
struct InviteRequest {
    email: String,
    /// `admin` or `expert`.
    #[schema(value_type = Role)]
    role: String,
}

/// Whether the invitation mail went out.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum MailOutcome {
    /// The transport took it.
    Sent,
    /// The transport refused it or could not be reached: copy the link.
    Failed,
    /// No system mail is configured: copy the link.
    NotConfigured,
}

#[derive(Serialize, ToSchema)]
struct Invited {
    invitation: Invitation,
    /// The link to give the invitee (shown once: only its hash is stored).
    link: String,
    mail: MailOutcome,
}

#[utoipa::path(post, path = "/orgs/{org_id}/invitations", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)), request_body = InviteRequest,
    responses((status = 201, description = "Invited; an open invitation for the same address is \
        replaced. The link is mailed when system mail is configured and returned here either way", body = Invited),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 409, description = "`already_member`: the address is a member already", body = ErrorBody),
        (status = 422, description = "Not an email address, or not a role", body = ErrorBody)))]
async fn invite(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(org_id): Path<Uuid>,
    Json(body): Json<InviteRequest>,
) -> ApiResult<Response> {
    caller.require_admin(org_id)?;
    let email = body.email.trim().to_lowercase();
    if !plausible_email(&email) {
        return Err(ApiError::validation("email must be one email address"));
    }
    let role = parse_role(&body.role)?;
    let actor = caller.actor(org_id, request_id.as_deref());
    let invited = flow::invite(state.team(), actor, org_id, caller.user_id, &email, role).await?;
    let body = Invited {
        invitation: invited.invitation,
        link: invited.link,
        mail: match invited.mail {
            Mailed::Sent => MailOutcome::Sent,
            Mailed::Failed => MailOutcome::Failed,
            Mailed::NotConfigured => MailOutcome::NotConfigured,
        },
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[derive(Serialize, ToSchema)]
struct InvitationList {
    invitations: Vec<Invitation>,
}

#[utoipa::path(get, path = "/orgs/{org_id}/invitations", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)),
    responses((status = 200, description = "Pending invitations (not accepted, revoked or expired), newest first", body = InvitationList),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin of this org", body = ErrorBody)))]
async fn list_invitations(
    State(state): State<AppState>,
    caller: Caller,
    Path(org_id): Path<Uuid>,
) -> ApiResult<Json<InvitationList>> {
    caller.require_admin(org_id)?;
    Ok(Json(InvitationList {
        invitations: invitations::pending(&state.db, org_id).await?,
    }))
}

#[utoipa::path(delete, path = "/orgs/{org_id}/invitations/{invitation_id}", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("invitation_id" = Uuid, Path)),
    responses((status = 204, description = "Revoked: its link no longer works"),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "No such pending invitation", body = ErrorBody)))]
async fn revoke_invitation(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, invitation_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    let actor = caller.admin_actor(org_id, request_id.as_deref())?;
    flow::revoke(&state.flows, actor, org_id, invitation_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, ToSchema)]
struct TokenBody {
    token: String,
}

#[derive(Serialize, ToSchema)]
struct InvitationPreview {
    email: String,
    org_id: Uuid,
    org_name: String,
    role: Role,
    expires_at: DateTime<Utc>,
    /// The address has an account already: accepting asks for its current password.
    existing_account: bool,
}

/// The invitation a token names, or why it cannot be accepted.
async fn pending_invitation(state: &AppState, token: &str) -> ApiResult<invitations::Found> {
    let found = invitations::find(&state.db, token).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "invitation_not_found",
            "this invitation link is not valid: ask for a new one",
        )
    })?;
    let gone = |code, message| Err(ApiError::new(StatusCode::GONE, code, message));
    match found.standing() {
        Standing::Pending => Ok(found),
        Standing::Used => gone(
            "invitation_used",
            "this invitation was accepted already: log in instead",
        ),
        Standing::Expired => gone(
            "invitation_expired",
            "this invitation has expired: ask an admin for a new one",
        ),
        Standing::Revoked => gone(
            "invitation_revoked",
            "this invitation was withdrawn: ask an admin for a new one",
        ),
    }
}

#[utoipa::path(post, path = "/invitations/preview", tag = "auth", request_body = TokenBody,
    responses((status = 200, description = "What the link invites to", body = InvitationPreview),
        (status = 404, description = "`invitation_not_found`", body = ErrorBody),
        (status = 410, description = "`invitation_used`, `invitation_expired` or `invitation_revoked`", body = ErrorBody),
        (status = 429, body = ErrorBody)))]
async fn preview_invitation(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Json<TokenBody>, ApiError>,
) -> ApiResult<Response> {
    if let Err(refused) = limit_address(&state, peer, &headers).await {
        return Ok(refused);
    }
    let Json(body) = body?;
    let found = pending_invitation(&state, &body.token).await?;
    let existing = users::find_for_login(&state.db, &found.invitation.email)
        .await?
        .is_some();
    let i = found.invitation;
    Ok(Json(InvitationPreview {
        email: i.email,
        org_id: i.org_id,
        org_name: found.org_name,
        role: i.role,
        expires_at: i.expires_at,
        existing_account: existing,
    })
    .into_response())
}

#[derive(Deserialize, ToSchema)]
struct AcceptRequest {
    token: String,
    /// A new user's password; for an address with an account, its current password.
    password: String,
    /// A new user's name (ignored for an existing account).
    #[serde(default)]
    display_name: Option<String>,
}

#[derive(Serialize, ToSchema)]
struct Accepted {
    #[serde(flatten)]
    login: LoginResponse,
    org_id: Uuid,
    role: Role,
}

#[utoipa::path(post, path = "/invitations/accept", tag = "auth", request_body = AcceptRequest,
    responses((status = 200, description = "A member now, and logged in", body = Accepted),
        (status = 401, description = "`unauthorized`: the address has an account and this is not its password; `user_deactivated`", body = ErrorBody),
        (status = 404, description = "`invitation_not_found`", body = ErrorBody),
        (status = 409, description = "`already_member`", body = ErrorBody),
        (status = 410, description = "`invitation_used`, `invitation_expired` or `invitation_revoked`", body = ErrorBody),
        (status = 422, description = "The password breaks the rules, or the display name is too long", body = ErrorBody),
        (status = 429, body = ErrorBody)))]
async fn accept_invitation(
    State(state): State<AppState>,
    RequestId(request_id): RequestId,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Json<AcceptRequest>, ApiError>,
) -> ApiResult<Response> {
    let address = match limit_address(&state, peer, &headers).await {
        Ok(address) => address,
        Err(refused) => return Ok(refused),
    };
    let Json(body) = body?;
    let found = pending_invitation(&state, &body.token).await?;
    let invitation = found.invitation;
    let display_name = body
        .display_name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    if display_name
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_DISPLAY_NAME)
    {
        return Err(ApiError::validation(format!(
            "display_name must be at most {MAX_DISPLAY_NAME} characters"
        )));
    }
    let existing = users::find_for_login(&state.db, &invitation.email).await?;
    let new_hash: String;
    let joining = match &existing {
        Some(record) => {
            if body.password.is_empty() || body.password.len() > users::PASSWORD_MAX_BYTES {
                return Err(ApiError::validation(
                    "password: this address has an account; enter its current password",
                ));
            }
            // The account's password, checked under the same per-email limits as a login:
            // an invitation link must not be a way around them.
            let attempt = match PasswordAttempt::start(&state, &invitation.email, &address).await {
                Ok(attempt) => attempt,
                Err(refused) => return Ok(refused),
            };
            let turn = hashing_turn().await?;
            let (password, stored) = (body.password, record.password_hash.clone());
            let ok =
                tokio::task::spawn_blocking(move || users::verify_password(&password, &stored))
                    .await
                    .map_err(ApiError::internal)?;
            drop(turn);
            if !ok {
                attempt.failed(&state).await;
                return Err(ApiError::unauthorized(
                    "this address has an account already: enter its current password",
                ));
            }
            attempt.succeeded(&state).await;
            if record.locked {
                return Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "user_deactivated",
                    "this user is deactivated; ask an administrator",
                ));
            }
            Joining::Existing(record.user.id)
        }
        None => {
            check_password("password", &body.password)?;
            new_hash = hash(body.password).await?;
            Joining::New {
                password_hash: &new_hash,
                display_name: display_name.as_deref(),
            }
        }
    };
    let record = flow::accept(&state.flows, request_id.as_deref(), &invitation, joining).await?;

    let (token, expires_at) = state
        .jwt
        .issue(record.user.id, record.token_version)
        .map_err(ApiError::internal)?;
    let user: User = record.user;
    Ok(Json(Accepted {
        login: LoginResponse {
            token,
            expires_at,
            user,
        },
        org_id: invitation.org_id,
        role: invitation.role,
    })
    .into_response())
}
