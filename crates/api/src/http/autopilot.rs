//! The org's autopilot policy (admins): which drafts may send themselves after a visible
//! hold, per channel, and the kill switch that turns it off at once. The rules and their
//! judgement live in `switchboard_domain::autopilot`; the changes, audited with what they
//! replaced, in `switchboard_flows::autopilot`.

use crate::auth::Caller;
use crate::error::responses::{NotAdmin, Unauthorized};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, RequestId};
use crate::state::AppState;
use axum::extract::State;
use switchboard_domain::autopilot::Policy;
use switchboard_flows::autopilot::{self as flow, PolicyError};
use switchboard_store::orgs;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(show, replace))
        .routes(routes!(pause))
}

impl From<PolicyError> for ApiError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::NotFound => ApiError::not_found("org"),
            PolicyError::Invalid(invalid) => ApiError::validation(invalid.to_string()),
            PolicyError::Store(e) => e.into(),
        }
    }
}

/// The org's autopilot policy; one never set reads as the default (off).
#[utoipa::path(get, path = "/orgs/{org_id}/autopilot", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)),
    responses(
        (status = 200, body = Policy),
        Unauthorized, NotAdmin,
        (status = 404, body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(org_id): Path<Uuid>,
) -> ApiResult<Json<Policy>> {
    caller.require_admin(org_id)?;
    let policy = orgs::autopilot(&state.db, org_id, orgs::Lock::Unlocked)
        .await?
        .ok_or_else(|| ApiError::not_found("org"))?;
    Ok(Json(policy))
}

/// Replaces the org's autopilot policy. A draft sends itself only when the org and its
/// channel are on, the agent's confidence (clamped to 0-1, absent = 0) reaches the channel's
/// `min_confidence`, within `business_hours` if set, and no `never_when` rule applies; never
/// a fallback draft, never while the agent's or the channel's breaker is open. The org's
/// drafts on hold go back to waiting for an expert (they were admitted under the rules
/// replaced). Audited with the policy before and after.
#[utoipa::path(put, path = "/orgs/{org_id}/autopilot", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)), request_body = Policy,
    responses(
        (status = 200, body = Policy),
        (status = 400, description = "Not a policy (an unknown field, a wrong type)", body = ErrorBody),
        Unauthorized, NotAdmin,
        (status = 404, body = ErrorBody),
        (status = 422, description = "A field out of bounds, named in the message", body = ErrorBody)))]
async fn replace(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(org_id): Path<Uuid>,
    Json(policy): Json<Policy>,
) -> ApiResult<Json<Policy>> {
    let actor = caller.admin_actor(org_id, request_id.as_deref())?;
    Ok(Json(flow::set(&state.flows, actor, org_id, policy).await?))
}

/// The kill switch (any admin of the org): turns the policy off at once, keeping its rules
/// for when it is turned on again, and stops every draft on hold (each waits for an expert,
/// live in every console). Audited, with how many holds it stopped.
#[utoipa::path(post, path = "/orgs/{org_id}/autopilot/pause", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)),
    responses(
        (status = 200, body = Policy),
        Unauthorized, NotAdmin,
        (status = 404, body = ErrorBody)))]
async fn pause(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(org_id): Path<Uuid>,
) -> ApiResult<Json<Policy>> {
    let actor = caller.admin_actor(org_id, request_id.as_deref())?;
    Ok(Json(flow::pause(&state.flows, actor, org_id).await?))
}
