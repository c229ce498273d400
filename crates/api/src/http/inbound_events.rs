//! The inbox for org admins: list accepted webhook events by state, inspect one (payload,
//! attempts, last error, the message it became), and replay one through the same idempotent
//! `channel-inbound` job (parked events wait for this). Experts and other orgs' admins get
//! 403; every replay is audited with its request id.

use crate::auth::Caller;
use crate::error::responses::Unauthorized;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, Query, RequestId};
use crate::http::pagination::Paging;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_domain::{ChannelKind, Role};
use switchboard_flows::inbox::{self as flow, ReplayError};
use switchboard_store::inbox::{self, EventFilter, EventRow, EventStatus};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(show))
        .routes(routes!(replay))
}

/// An inbox event as the list shows it.
#[derive(Debug, Serialize, ToSchema)]
struct EventView {
    id: Uuid,
    org_id: Uuid,
    connection_id: Uuid,
    channel: ChannelKind,
    /// The provider's id for the delivery (what retries dedup on).
    dedup_key: String,
    /// `pending`, `processing`, `processed` or `parked`.
    #[schema(value_type = String)]
    status: EventStatus,
    /// Failed attempts so far.
    attempts: i32,
    last_error: Option<String>,
    received_at: DateTime<Utc>,
    /// A failed event is not retried before this.
    retry_at: Option<DateTime<Utc>>,
    parked_at: Option<DateTime<Utc>>,
    processed_at: Option<DateTime<Utc>>,
}

impl From<EventRow> for EventView {
    fn from(r: EventRow) -> Self {
        EventView {
            id: r.id,
            org_id: r.org_id,
            connection_id: r.connection_id,
            channel: r.channel,
            dedup_key: r.dedup_key,
            status: r.status,
            attempts: r.attempts,
            last_error: r.last_error,
            received_at: r.received_at,
            retry_at: r.retry_at,
            parked_at: r.parked_at,
            processed_at: r.processed_at,
        }
    }
}

/// One event with its payload and what it became.
#[derive(Debug, Serialize, ToSchema)]
struct EventDetailView {
    #[serde(flatten)]
    event: EventView,
    /// `{"message": …|null, "raw": <the provider's payload>}` as stored.
    payload: Value,
    /// The message the event became, once stored.
    message_id: Option<Uuid>,
    conversation_id: Option<Uuid>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Default: every org the caller administers.
    org_id: Option<Uuid>,
    /// `pending`, `processing`, `processed` or `parked`; default: all.
    #[serde(default, deserialize_with = "crate::extract::empty_as_none")]
    status: Option<EventStatus>,
    #[serde(default, deserialize_with = "crate::extract::empty_as_none")]
    channel: Option<ChannelKind>,
    cursor: Option<String>,
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = InboundEventPage)]
struct ListResponse {
    /// Newest first.
    items: Vec<EventView>,
    next_cursor: Option<String>,
}

#[derive(Serialize, ToSchema)]
struct ReplayResponse {
    /// `queued`: the job will run it again.
    status: String,
    event_id: Uuid,
}

#[utoipa::path(get, path = "/inbound-events", tag = "inbound-events", security(("bearer" = [])), params(ListQuery),
    responses((status = 200, body = ListResponse), (status = 400, description = "Bad cursor", body = ErrorBody),
        Unauthorized,
        (status = 403, description = "Another org's events, or not an admin", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListResponse>> {
    let orgs = caller.scope(q.org_id, Role::Admin)?;
    let paging = Paging::read(q.limit, q.cursor.as_deref())?;
    let filter = EventFilter {
        orgs,
        status: q.status,
        channel: q.channel,
        before: paging.after,
        limit: paging.fetch(),
    };
    let rows = inbox::list(&state.db, &filter).await?;
    let (items, next_cursor) = paging.page(rows, |r| (r.received_at, r.id), EventView::from);
    Ok(Json(ListResponse { items, next_cursor }))
}

/// 404 when there is no such event, 403 unless the caller administers its org.
async fn event_org(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Uuid> {
    let org = inbox::org_of(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("inbound event"))?;
    caller.require_admin(org)?;
    Ok(org)
}

#[utoipa::path(get, path = "/inbound-events/{id}", tag = "inbound-events", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses((status = 200, body = EventDetailView), Unauthorized,
        (status = 403, description = "Another org's event, or not an admin", body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<EventDetailView>> {
    event_org(&state, &caller, id).await?;
    let d = inbox::detail(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("inbound event"))?;
    Ok(Json(EventDetailView {
        event: d.row.into(),
        payload: d.payload,
        message_id: d.message_id,
        conversation_id: d.conversation_id,
    }))
}

#[utoipa::path(post, path = "/inbound-events/{id}/replay", tag = "inbound-events", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses((status = 202, description = "Unparked and queued for the job", body = ReplayResponse),
        Unauthorized,
        (status = 403, description = "Another org's event, or not an admin", body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Already processed: nothing to run again", body = ErrorBody)))]
async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
) -> ApiResult<(StatusCode, Json<ReplayResponse>)> {
    let org = event_org(&state, &caller, id).await?;
    let actor = caller.actor(org, request_id.as_deref());
    flow::replay(&state.flows, &state.inbound, actor, id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ReplayResponse {
            status: "queued".into(),
            event_id: id,
        }),
    ))
}

impl From<ReplayError> for ApiError {
    fn from(e: ReplayError) -> Self {
        match e {
            ReplayError::AlreadyProcessed => ApiError::conflict(e.to_string()),
            ReplayError::NotFound => ApiError::not_found("inbound event"),
            ReplayError::Store(e) => e.into(),
        }
    }
}
