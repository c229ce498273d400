//! Org membership for org admins: the list, role changes, deactivation and reactivation in
//! this org, and removal. An org always keeps an active admin: demoting, deactivating or
//! removing the last one is refused (409 `last_admin`), under the org's row lock
//! (`org_members::lock_org`) so two admins acting at once cannot both pass the check.
//!
//! Deactivation, like removal, bumps the member's token version with the change. The removal, the bump of the member's
//! token version and the audit row commit together, so every token the member holds stops
//! working with the membership: REST refuses it at the next request (401 `token_revoked`),
//! the member's sockets are closed on every pod through Redis at once, and, should that
//! broadcast be lost (Redis away, this pod killed right after the commit), by each pod's own
//! session check within seconds. The member logs in again to use their other orgs. The
//! changes are `switchboard_flows::team::members`'.

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, RequestId};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use switchboard_domain::Role;
use switchboard_flows::team::{TeamError, members};
use switchboard_store::org_members::{self, OrgMember};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_members))
        .routes(routes!(remove, change_role))
        .routes(routes!(deactivate_member))
        .routes(routes!(reactivate_member))
}

#[derive(Serialize, ToSchema)]
struct MemberList {
    members: Vec<OrgMember>,
}

#[utoipa::path(get, path = "/orgs/{org_id}/members", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)),
    responses((status = 200, description = "The org's members, oldest first, with their role and status", body = MemberList),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin of this org", body = ErrorBody)))]
async fn list_members(
    State(state): State<AppState>,
    caller: Caller,
    Path(org_id): Path<Uuid>,
) -> ApiResult<Json<MemberList>> {
    caller.require_admin(org_id)?;
    Ok(Json(MemberList {
        members: org_members::list(&state.db, org_id).await?,
    }))
}

#[derive(Deserialize, ToSchema)]
struct RoleChange {
    /// `admin` or `expert`.
    #[schema(value_type = Role)]
    role: String,
}

#[utoipa::path(patch, path = "/orgs/{org_id}/members/{user_id}", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("user_id" = Uuid, Path)), request_body = RoleChange,
    responses((status = 200, description = "The member with their new role (in effect at their next request)", body = OrgMember),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "Not a member", body = ErrorBody),
        (status = 409, description = "`last_admin`: the org's last active admin cannot be demoted", body = ErrorBody),
        (status = 422, description = "Not a role", body = ErrorBody)))]
async fn change_role(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, user_id)): Path<(Uuid, Uuid)>,
    Json(body): Json<RoleChange>,
) -> ApiResult<Json<OrgMember>> {
    caller.require_admin(org_id)?;
    let role: Role = body
        .role
        .parse()
        .map_err(|_| ApiError::validation("role must be `admin` or `expert`"))?;
    let actor = caller.actor(org_id, request_id.as_deref());
    let member = members::change_role(&state.flows, actor, org_id, user_id, role).await?;
    Ok(Json(member))
}

#[utoipa::path(post, path = "/orgs/{org_id}/members/{user_id}/deactivate", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("user_id" = Uuid, Path)),
    responses((status = 200, description = "Deactivated in this org: every token of the member is \
        revoked and their sockets closed on every pod within seconds; they cannot log in unless \
        they have another active membership", body = OrgMember),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "Not a member", body = ErrorBody),
        (status = 409, description = "`last_admin`: the org's last active admin cannot be deactivated", body = ErrorBody)))]
async fn deactivate_member(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, user_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<Json<OrgMember>> {
    let actor = caller.admin_actor(org_id, request_id.as_deref())?;
    let member = members::deactivate(state.team(), actor, org_id, user_id).await?;
    Ok(Json(member))
}

#[utoipa::path(post, path = "/orgs/{org_id}/members/{user_id}/reactivate", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("user_id" = Uuid, Path)),
    responses((status = 200, description = "Active again in this org; they log in again (tokens from before stay revoked)", body = OrgMember),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "Not a member", body = ErrorBody)))]
async fn reactivate_member(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, user_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<Json<OrgMember>> {
    let actor = caller.admin_actor(org_id, request_id.as_deref())?;
    let member = members::reactivate(&state.flows, actor, org_id, user_id).await?;
    Ok(Json(member))
}

#[utoipa::path(delete, path = "/orgs/{org_id}/members/{user_id}", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("user_id" = Uuid, Path)),
    responses((status = 204, description = "Removed; every token of the member is revoked (they \
        log in again for their other orgs) and their sockets are closed on every pod within \
        seconds"),
        (status = 401, description = "No valid bearer token (`unauthorized`), or a revoked one (`token_revoked`)", body = ErrorBody),
        (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "Not a member", body = ErrorBody),
        (status = 409, description = "`last_admin`: the org's last active admin cannot be removed", body = ErrorBody)))]
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, user_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    let actor = caller.admin_actor(org_id, request_id.as_deref())?;
    members::remove(state.team(), actor, org_id, user_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The team's refusals (members, invitations, passwords, sessions), each with its code.
impl From<TeamError> for ApiError {
    fn from(e: TeamError) -> Self {
        let message = e.to_string();
        match e {
            TeamError::LastAdmin => ApiError::new(StatusCode::CONFLICT, "last_admin", message),
            TeamError::NotMember => ApiError::not_found("member"),
            TeamError::AddressIsMember | TeamError::AlreadyMember => {
                ApiError::new(StatusCode::CONFLICT, "already_member", message)
            }
            TeamError::NoInvitation => ApiError::not_found("invitation"),
            TeamError::InvitationUsed => {
                ApiError::new(StatusCode::GONE, "invitation_used", message)
            }
            TeamError::AccountJustMade => ApiError::conflict(message),
            TeamError::PasswordChanged => {
                ApiError::new(StatusCode::UNAUTHORIZED, "token_revoked", message)
            }
            TeamError::UserGone => ApiError::unauthorized(message),
            TeamError::Reset(refusal) => crate::http::passwords::refused(refusal),
            TeamError::Hashing(e) => ApiError::internal(e),
            TeamError::Store(e) => e.into(),
        }
    }
}
