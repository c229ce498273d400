//! `GET /events?org_id=…&after={seq}&limit=…`: the realtime events a client missed, in
//! order. A client tracks the last `seq` it saw per org; when an event arrives with a
//! larger jump, or after a reconnect, it asks from there and pages on until `latest_seq`.

use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::error::responses::{OutOfScope, Unauthorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Query};
use crate::state::AppState;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use switchboard_realtime::events::{self, StoredEvent};
use switchboard_store::StoreError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EventsQuery {
    org_id: Uuid,
    #[serde(default)]
    after: i64,
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
struct EventsPage {
    /// Events with `seq > after`, oldest first, at most `limit`.
    events: Vec<StoredEvent>,
    /// The org's newest number when the request was answered.
    latest_seq: i64,
    /// True when events right after `after` are gone (older than the retention): the
    /// client cannot replay them and should reload its lists.
    truncated: bool,
}

#[utoipa::path(get, path = "/events", tag = "realtime", security(("bearer" = [])), params(EventsQuery),
    responses((status = 200, body = EventsPage),
        Unauthorized, OutOfScope,
        (status = 422, body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<EventsQuery>,
) -> ApiResult<Json<EventsPage>> {
    caller.role_in(query.org_id)?;
    if query.after < 0 {
        return Err(ApiError::validation("after must be 0 or more"));
    }
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::validation(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    // The newest number first: an event is committed with its number, so everything up
    // to it is readable now, and a gap below it can only mean deleted events.
    let latest_seq = events::latest_seq(&state.db, query.org_id)
        .await
        .map_err(StoreError::from)?;
    let events = events::after(&state.db, query.org_id, query.after, limit)
        .await
        .map_err(StoreError::from)?;
    let truncated = match events.first() {
        Some(first) => first.seq > query.after + 1,
        None => latest_seq > query.after,
    };
    Ok(Json(EventsPage {
        events,
        latest_seq,
        truncated,
    }))
}
