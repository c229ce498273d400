//! Dead letters for org admins: replies whose delivery failed for good, and a retry.
//! Experts and other orgs' admins get 403; every retry is audited with its request id.

use crate::auth::Caller;
use crate::error::responses::{NotAdmin, Unauthorized};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, Query, RequestId};
use crate::http::pagination::Paging;
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use switchboard_domain::{ChannelKind, DeadLetterStatus, Role};
use switchboard_flows::dead_letters::{self as flow, RetryError};
use switchboard_store::dead_letters::{self, DeadLetter, Filter};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(retry))
}

/// A reply whose delivery failed for good.
#[derive(Debug, Serialize, ToSchema)]
struct DeadLetterView {
    id: Uuid,
    org_id: Uuid,
    outbox_id: Uuid,
    /// The outbound message (its delivery status is on it in `GET /conversations/{id}`).
    message_id: Uuid,
    conversation_id: Uuid,
    channel: ChannelKind,
    /// `queued` (a retry will follow), `retrying`, `dead` or `resolved`.
    status: DeadLetterStatus,
    /// The provider's last refusal, without secrets.
    error: String,
    /// The provider's last HTTP status, when it answered.
    provider_status: Option<i32>,
    /// Failed provider attempts so far.
    attempts: i32,
    /// Dead-letter retries so far (5 make it `dead`).
    retries: i32,
    next_attempt_at: DateTime<Utc>,
    /// When the `dead` alert was raised.
    alerted_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<DeadLetter> for DeadLetterView {
    fn from(d: DeadLetter) -> Self {
        DeadLetterView {
            id: d.id,
            org_id: d.org_id,
            outbox_id: d.outbox_id,
            message_id: d.message_id,
            conversation_id: d.conversation_id,
            channel: d.channel,
            status: d.status,
            error: d.error,
            provider_status: d.provider_status,
            attempts: d.attempts,
            retries: d.retries,
            next_attempt_at: d.next_attempt_at,
            alerted_at: d.alerted_at,
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// One org the caller administers; all of them when absent.
    org_id: Option<Uuid>,
    #[serde(default, deserialize_with = "crate::extract::empty_as_none")]
    status: Option<DeadLetterStatus>,
    cursor: Option<String>,
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = DeadLetterPage)]
struct ListResponse {
    items: Vec<DeadLetterView>,
    next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/dead-letters", tag = "dead-letters", security(("bearer" = [])), params(ListQuery),
    description = "Failed deliveries of the orgs the caller administers, newest first",
    responses((status = 200, body = ListResponse),
        (status = 400, body = ErrorBody),
        Unauthorized, NotAdmin,
        (status = 422, body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListResponse>> {
    let orgs = caller.scope(q.org_id, Role::Admin)?;
    let paging = Paging::read(q.limit, q.cursor.as_deref())?;
    let filter = Filter {
        orgs,
        status: q.status,
        after: paging.after,
        limit: paging.fetch(),
    };
    let rows = dead_letters::list(&state.db, &filter).await?;
    let (items, next_cursor) = paging.page(rows, |r| (r.created_at, r.id), DeadLetterView::from);
    Ok(Json(ListResponse { items, next_cursor }))
}

/// Hands a `queued` or `dead` row back to the dispatch job now; 409 when it is already
/// being retried or was resolved.
#[utoipa::path(post, path = "/dead-letters/{id}/retry", tag = "dead-letters", security(("bearer" = [])), params(("id" = Uuid, Path)),
    description = "Send a queued or dead reply again now (audited)",
    responses((status = 200, body = DeadLetterView),
        Unauthorized, NotAdmin,
        (status = 404, body = ErrorBody),
        (status = 409, description = "Already being retried, or resolved", body = ErrorBody)))]
async fn retry(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<DeadLetterView>> {
    let found = dead_letters::get(&state.db, id).await?;
    let letter = found.ok_or_else(|| ApiError::not_found("dead letter"))?;
    let actor = caller.admin_actor(letter.org_id, request_id.as_deref())?;
    Ok(Json(
        flow::retry(&state.flows, actor, &letter).await?.into(),
    ))
}

impl From<RetryError> for ApiError {
    fn from(e: RetryError) -> Self {
        match e {
            RetryError::NotRetryable(status) => {
                ApiError::conflict(e.to_string()).with_field("current", &json!({"status": status}))
            }
            RetryError::NotFound => ApiError::not_found("dead letter"),
            RetryError::Store(e) => e.into(),
        }
    }
}
