//! Org membership for org admins: removing a member. Access follows at once: REST reads
//! memberships on every request, and the member's live Socket.IO connections are closed on
//! every pod (a reconnect is admitted with the memberships that remain).

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Path, RequestId};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::json;
use switchboard_store::audit::{self, Actor};
use switchboard_store::users;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(remove))
}

#[utoipa::path(delete, path = "/orgs/{org_id}/members/{user_id}", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("user_id" = Uuid, Path)),
    responses((status = 204, description = "Removed; the member's sockets are closed on every pod"),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "Not a member", body = ErrorBody)))]
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, user_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    caller.require_admin(org_id)?;
    if !users::remove_member(&state.db, org_id, user_id).await? {
        return Err(ApiError::not_found("member"));
    }
    audit::record(
        &state.db,
        Actor {
            org_id: Some(org_id),
            user_id: Some(caller.user_id),
            request_id: request_id.as_deref(),
        },
        "org_member.removed",
        Some(("user", user_id)),
        json!({}),
    )
    .await?;
    state.realtime.disconnect_user(user_id).await;
    Ok(StatusCode::NO_CONTENT)
}
