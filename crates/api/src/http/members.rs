//! Org membership for org admins: removing a member. The removal, the bump of the member's
//! token version and the audit row commit together, so every token the member holds stops
//! working with the membership: REST refuses it at the next request (401 `token_revoked`),
//! the member's sockets are closed on every pod through Redis at once, and, should that
//! broadcast be lost (Redis away, this pod killed right after the commit), by each pod's own
//! session check within seconds. The member logs in again to use their other orgs.

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Path, RequestId};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::json;
use switchboard_store::StoreError;
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
    responses((status = 204, description = "Removed; every token of the member is revoked (they log in again for their other orgs) and their sockets are closed on every pod within seconds"),
        (status = 401, description = "No valid bearer token (`unauthorized`), or a revoked one (`token_revoked`)", body = ErrorBody),
        (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "Not a member", body = ErrorBody)))]
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, user_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    caller.require_admin(org_id)?;
    let mut tx = state.db.begin().await.map_err(StoreError::from)?;
    if !users::remove_member(&mut *tx, org_id, user_id).await? {
        return Err(ApiError::not_found("member"));
    }
    audit::record(
        &mut *tx,
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
    tx.commit().await.map_err(StoreError::from)?;
    state.realtime.disconnect_user(user_id).await;
    Ok(StatusCode::NO_CONTENT)
}
