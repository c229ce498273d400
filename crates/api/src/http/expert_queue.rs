//! The expert queue: the console's list, one item, and the expert's actions on it (claim,
//! release (F3), respond, snooze, resolve, reopen; unclaim and assign). Every query is
//! scoped to the caller's orgs through `Caller::scope`: another org's item is 403, never
//! 404 or 200, and so is a list for a caller who holds the role in no org (never an empty
//! 200 that looks like an empty org); a filter value it does not know is 422. Every action
//! takes an `Idempotency-Key` and an optional `If-Match`; the item and every action answer
//! its `ETag`.
//!
//! The list is keyset-paged, longest waiting first on `(created_at, id)` or, with
//! `order=recent`, newest activity first on `(updated_at, id)`; each row carries its
//! customer, last customer message and draft. A page never repeats or skips an item whose
//! key was older than the cursor when it was read; an item committed later with an older
//! `created_at` (its transaction began before the read) shows on the next refresh or
//! through its realtime event.

use crate::auth::Caller;
use crate::error::responses::{OutOfScope, Unauthorized};
use crate::error::{ApiError, ApiResult};
use crate::error::{ConflictBody, ErrorBody};
use crate::extract::{IfMatch, Json, Path, Query, RequestId, etag};
use crate::http::pagination::Paging;
use crate::idempotency::{self, Idempotent};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::json;
use switchboard_domain::{Author, ChannelKind, DeliveryStatus, QueueStatus, Role};
use switchboard_flows::expert::{self, Action, ActionError, Actor, Done};
use switchboard_flows::idempotency::{Answer, Keyed};
use switchboard_store::expert_queue::{self, Assigned, ItemFilter, ItemRow, Order};
use tracing::Instrument;
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Longest reply accepted, in characters (the channels split what they must).
const MAX_REPLY_CHARS: usize = 32_000;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ActionSchemas::openapi())
        .routes(routes!(list))
        .routes(routes!(show))
        .routes(routes!(claim))
        .routes(routes!(unclaim))
        .routes(routes!(assign))
        .routes(routes!(release))
        .routes(routes!(respond))
        .routes(routes!(resolve))
        .routes(routes!(snooze))
        .routes(routes!(reopen))
        .routes(routes!(stop))
}

/// A queue item as a console row shows it, with no further request needed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ItemView {
    id: Uuid,
    org_id: Uuid,
    status: QueueStatus,
    version: i32,
    channel: ChannelKind,
    conversation_id: Uuid,
    customer: CustomerView,
    last_message: Option<LastMessage>,
    draft: Option<DraftView>,
    flagged: bool,
    claimed_by: Option<Uuid>,
    snoozed_until: Option<DateTime<Utc>>,
    sla_due_at: Option<DateTime<Utc>>,
    /// `auto_pending`: when the draft sends itself unless someone stops it.
    send_at: Option<DateTime<Utc>>,
    /// `auto_pending`: the rule of the org's autopilot that admitted the draft.
    autopilot_rule: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// Who the conversation is with.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CustomerView {
    pub(crate) id: Uuid,
    pub(crate) display_name: Option<String>,
    pub(crate) external_id: String,
}

/// The last customer message, shortened.
#[derive(Debug, Serialize, ToSchema)]
struct LastMessage {
    preview: String,
    at: DateTime<Utc>,
}

/// The agent's current draft.
#[derive(Debug, Serialize, ToSchema)]
struct DraftView {
    id: Option<Uuid>,
    text: String,
    confidence: Option<f32>,
    /// True when the agent failed and this is the stored fallback text.
    fallback: bool,
}

impl From<ItemRow> for ItemView {
    fn from(r: ItemRow) -> Self {
        ItemView {
            id: r.id,
            org_id: r.org_id,
            status: r.status,
            version: r.version,
            channel: r.channel,
            conversation_id: r.conversation_id,
            customer: CustomerView {
                id: r.customer_id,
                display_name: r.customer_name,
                external_id: r.customer_external_id,
            },
            last_message: r
                .last_message_preview
                .zip(r.last_message_at)
                .map(|(preview, at)| LastMessage { preview, at }),
            draft: r.draft_body.map(|text| DraftView {
                id: r.draft_id,
                text,
                confidence: r.draft_confidence,
                fallback: r.draft_fallback,
            }),
            flagged: r.flagged_for_review,
            claimed_by: r.claimed_by,
            snoozed_until: r.snoozed_until,
            sla_due_at: r.sla_due_at,
            send_at: r.send_at,
            autopilot_rule: r.autopilot_rule,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    org_id: Option<Uuid>,
    /// One state or several, comma separated; default: every state but resolved.
    status: Option<String>,
    #[serde(default, deserialize_with = "crate::extract::empty_as_none")]
    channel: Option<ChannelKind>,
    flagged: Option<bool>,
    /// `me`, `unassigned` or a user id.
    assigned: Option<String>,
    /// `waiting` (default: longest waiting first) or `recent` (newest activity first).
    order: Option<String>,
    cursor: Option<String>,
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ItemPage)]
struct ListResponse {
    items: Vec<ItemView>,
    next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/expert-queue", tag = "expert-queue", security(("bearer" = [])), params(ListQuery),
    responses((status = 200, body = ListResponse),
        (status = 400, description = "Bad cursor", body = ErrorBody),
        Unauthorized, OutOfScope,
        (status = 422, body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListResponse>> {
    let orgs = caller.scope(q.org_id, Role::Expert)?;
    let statuses = match q.status.as_deref() {
        None | Some("") => Some(
            QueueStatus::ALL
                .into_iter()
                .filter(|s| *s != QueueStatus::Resolved)
                .collect(),
        ),
        Some("all") => None,
        Some(list) => Some(
            list.split(',')
                .map(|s| s.trim().parse::<QueueStatus>())
                .collect::<Result<Vec<_>, ()>>()
                .map_err(|()| {
                    ApiError::validation(
                        "status must be all, or a comma-separated list of pending, auto_pending, claimed, awaiting_client, snoozed, resolved",
                    )
                })?,
        ),
    };
    let assigned =
        match q.assigned.as_deref() {
            None | Some("") => Assigned::Any,
            Some("me") => Assigned::User(caller.user_id),
            Some("unassigned") => Assigned::Unassigned,
            Some(other) => Assigned::User(other.parse().map_err(|_| {
                ApiError::validation("assigned must be me, unassigned or a user id")
            })?),
        };
    let order = match q.order.as_deref() {
        None | Some("waiting") => Order::Waiting,
        Some("recent") => Order::Recent,
        Some(_) => return Err(ApiError::validation("order must be waiting or recent")),
    };
    let paging = Paging::read(q.limit, q.cursor.as_deref())?;
    let filter = ItemFilter {
        orgs,
        statuses,
        channel: q.channel,
        flagged: q.flagged,
        assigned,
        order,
        after: paging.after,
        limit: paging.fetch(),
    };
    let rows = expert_queue::list(&state.db, &filter).await?;
    let key = |r: &ItemRow| match order {
        Order::Waiting => (r.created_at, r.id),
        Order::Recent => (r.updated_at, r.id),
    };
    let (items, next_cursor) = paging.page(rows, key, ItemView::from);
    Ok(Json(ListResponse { items, next_cursor }))
}

/// The org of item `id`: 404 when there is no such item, 403 when it is another org's.
async fn item_org(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Uuid> {
    let org = expert_queue::org_of(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("queue item"))?;
    caller.role_in(org)?;
    Ok(org)
}

#[utoipa::path(get, path = "/expert-queue/{id}", tag = "expert-queue", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, body = ItemView, headers(("ETag" = String, description = "`\"<version>\"`: send it back as `If-Match`"))),
        Unauthorized, OutOfScope,
        (status = 404, body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    item_org(&state, &caller, id).await?;
    let row = expert_queue::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("queue item"))?;
    let tag = etag(row.version);
    Ok(([(axum::http::header::ETAG, tag)], Json(ItemView::from(row))).into_response())
}

#[derive(Deserialize, ToSchema)]
struct AssignBody {
    user_id: Uuid,
}

#[derive(Deserialize, Default, ToSchema)]
struct ReleaseBody {
    body: Option<String>,
}

#[derive(Deserialize, ToSchema)]
struct RespondBody {
    body: Option<String>,
}

#[derive(Deserialize, ToSchema)]
struct SnoozeBody {
    until: Option<DateTime<Utc>>,
}

/// The headers every action reads (`Idempotent` and `IfMatch` parse them), as the OpenAPI
/// document lists them.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // never built: it only describes the headers
struct ActionHeaders {
    /// Replays the first answer to a retry
    #[param(rename = "Idempotency-Key")]
    idempotency_key: Option<String>,
    /// The item's ETag as the client saw it (`"<version>"`): the action applies only to that version
    #[param(rename = "If-Match")]
    if_match: Option<String>,
}

/// The schemas [`ActionResponses`] names, which a response type does not add to the
/// document itself (a `body = …` does).
#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(ActionAnswer)))]
struct ActionSchemas;

/// What every action answers, as the OpenAPI document lists it (`stop` words its 409 apart).
/// Never built: the handlers answer an `ActionAnswer` or an `ApiError`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code, clippy::large_enum_variant)]
enum ActionResponses {
    #[response(status = 200)]
    Done(ActionAnswer),
    #[response(status = 400)]
    BadRequest(ErrorBody),
    #[response(status = 401, description = "No valid bearer token")]
    Unauthorized(ErrorBody),
    #[response(
        status = 403,
        description = "Another org's resource, or the role is too low"
    )]
    Forbidden(ErrorBody),
    #[response(status = 404)]
    NotFound(ErrorBody),
    #[response(
        status = 409,
        description = "The item is in another state (`current` says which), or the key's \
            first request still runs; for a release without a body also `no_draft` (nothing \
            to send) or `stale_draft` (the draft answers an older customer message), \
            `current` then being the whole item"
    )]
    Conflict(ConflictBody),
    #[response(
        status = 412,
        description = "`precondition_failed`: `If-Match` names another version; `current` \
            is the item now (its new message, draft, state or holder)"
    )]
    Changed(ConflictBody),
    #[response(
        status = 422,
        description = "Invalid input, or the key was used for another request"
    )]
    Invalid(ErrorBody),
}

/// A reply text as given, or 422.
fn reply_text(body: Option<String>, required: bool) -> ApiResult<Option<String>> {
    match body {
        None if required => Err(ApiError::validation("body is required")),
        None => Ok(None),
        Some(text) if text.trim().is_empty() => Err(ApiError::validation("body must not be empty")),
        Some(text) if text.chars().count() > MAX_REPLY_CHARS => Err(ApiError::validation(format!(
            "body must be at most {MAX_REPLY_CHARS} characters"
        ))),
        Some(text) => Ok(Some(text)),
    }
}

#[utoipa::path(post, path = "/expert-queue/{id}/claim", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Take the item (the holder again: 200, no change)",
    params(("id" = Uuid, Path), ActionHeaders),
    responses(ActionResponses))]
async fn claim(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<IgnoredAny>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |_| Ok(Action::Claim)).await
}

#[utoipa::path(post, path = "/expert-queue/{id}/unclaim", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Give the item back (the holder, or an admin)",
    params(("id" = Uuid, Path), ActionHeaders),
    responses(ActionResponses))]
async fn unclaim(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<IgnoredAny>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |_| {
        Ok(Action::Unclaim)
    })
    .await
}

#[utoipa::path(post, path = "/expert-queue/{id}/assign", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Give the item to a member (admins)",
    params(("id" = Uuid, Path), ActionHeaders),
    request_body = AssignBody,
    responses(ActionResponses))]
async fn assign(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<AssignBody>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |b| {
        Ok(Action::Assign { user_id: b.user_id })
    })
    .await
}

#[utoipa::path(post, path = "/expert-queue/{id}/release", tag = "expert-queue",
    security(("bearer" = [])),
    description = "F3: send the draft, or the edited body",
    params(("id" = Uuid, Path), ActionHeaders),
    request_body = ReleaseBody,
    responses(ActionResponses))]
async fn release(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<ReleaseBody>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |b| {
        Ok(Action::Release {
            body: reply_text(b.body.clone(), false)?,
        })
    })
    .await
}

#[utoipa::path(post, path = "/expert-queue/{id}/respond", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Send the expert's own reply instead of the draft",
    params(("id" = Uuid, Path), ActionHeaders),
    request_body = RespondBody,
    responses(ActionResponses))]
async fn respond(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<RespondBody>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |b| {
        Ok(Action::Respond {
            body: reply_text(b.body.clone(), true)?.unwrap_or_default(),
        })
    })
    .await
}

#[utoipa::path(post, path = "/expert-queue/{id}/resolve", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Close the item",
    params(("id" = Uuid, Path), ActionHeaders),
    responses(ActionResponses))]
async fn resolve(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<IgnoredAny>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |_| {
        Ok(Action::Resolve)
    })
    .await
}

#[utoipa::path(post, path = "/expert-queue/{id}/snooze", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Put the item aside until a time in the future",
    params(("id" = Uuid, Path), ActionHeaders),
    request_body = SnoozeBody,
    responses(ActionResponses))]
async fn snooze(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<SnoozeBody>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |b| match b.until {
        Some(until) if until > Utc::now() => Ok(Action::Snooze { until }),
        Some(_) => Err(ApiError::validation("until must be in the future")),
        None => Err(ApiError::validation("until is required (an RFC 3339 time)")),
    })
    .await
}

#[utoipa::path(post, path = "/expert-queue/{id}/reopen", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Bring the item back to pending",
    params(("id" = Uuid, Path), ActionHeaders),
    responses(ActionResponses))]
async fn reopen(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<IgnoredAny>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |_| {
        Ok(Action::Reopen)
    })
    .await
}

#[utoipa::path(post, path = "/expert-queue/{id}/stop", tag = "expert-queue",
    security(("bearer" = [])),
    description = "Stop the autopilot's hold: the draft does not send itself, and the item waits for an expert (any member)",
    params(("id" = Uuid, Path), ActionHeaders),
    responses(ActionResponses, (status = 409, body = ConflictBody,
        description = "The item is not on hold (`current` says its state: sent, stopped, or \
            taken by an expert), or the key's first request still runs")))]
async fn stop(
    state: State<AppState>,
    caller: Caller,
    rid: RequestId,
    id: Path<Uuid>,
    if_match: IfMatch,
    req: Idempotent<IgnoredAny>,
) -> ApiResult<Response> {
    perform_action(state, caller, rid, id, if_match, req, |_| Ok(Action::Stop)).await
}

/// Every action's request: access (404/403), validation, then the flow (the
/// Idempotency-Key, one transaction with the transition, its writes and the stored answer).
async fn perform_action<T>(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
    IfMatch(if_match): IfMatch,
    req: Idempotent<T>,
    action: impl FnOnce(&T) -> ApiResult<Action>,
) -> ApiResult<Response> {
    let org_id = item_org(&state, &caller, id).await?;
    let actor = Actor {
        user_id: caller.user_id,
        role: caller.role_in(org_id)?,
        request_id,
    };
    let request = expert::Request {
        org_id,
        item_id: id,
        actor,
        action: action(&req.body)?,
        if_match,
        key: req.key(org_id, caller.user_id),
    };
    let span = tracing::info_span!(
        "expert_action",
        action = request.action.name(),
        %org_id,
        queue_item_id = %id,
        outcome = tracing::field::Empty,
    );
    let performed = expert::perform(&state.flows, &request, answer)
        .instrument(span.clone())
        .await;
    span.record("outcome", action_outcome(&performed));
    Ok(match performed? {
        Keyed::Ran((done, answer)) => (
            StatusCode::OK,
            [(axum::http::header::ETAG, etag(done.item.version))],
            axum::Json(answer.body),
        )
            .into_response(),
        Keyed::Replayed(first) => idempotency::replayed(first),
    })
}

/// The span attribute `outcome` of an action: `unchanged` or `edited` for a reply (the
/// draft as the agent wrote it, or not), `done`, `no_change`, `replayed` (an
/// Idempotency-Key answered before) or `refused`.
fn action_outcome<E>(performed: &Result<Keyed<(Done, Answer)>, E>) -> &'static str {
    match performed {
        Ok(Keyed::Ran((done, _))) => match &done.reply {
            Some(reply) if reply.message.author == Author::Agent => "unchanged",
            Some(_) => "edited",
            None if done.changed => "done",
            None => "no_change",
        },
        Ok(Keyed::Replayed(_)) => "replayed",
        Err(_) => "refused",
    }
}

/// What an action answers (and what its Idempotency-Key replays).
#[derive(Serialize, ToSchema)]
struct ActionAnswer {
    item: ItemView,
    /// The reply queued for delivery (release and respond).
    message: Option<ReplyView>,
}

/// A reply as queued.
#[derive(Serialize, ToSchema)]
struct ReplyView {
    id: Uuid,
    author: Author,
    body: String,
    delivery_status: Option<DeliveryStatus>,
    created_at: DateTime<Utc>,
    outbox_id: Uuid,
}

fn answer(done: &Done) -> ApiResult<Answer> {
    let answer = ActionAnswer {
        item: ItemView::from(done.item.clone()),
        message: done.reply.as_ref().map(|r| ReplyView {
            id: r.message.id,
            author: r.message.author,
            body: r.message.body.clone(),
            delivery_status: r.message.delivery_status,
            created_at: r.message.created_at,
            outbox_id: r.outbox_id,
        }),
    };
    let body = serde_json::to_value(answer).map_err(ApiError::internal)?;
    Ok(Answer {
        status: StatusCode::OK.as_u16(),
        body,
    })
}

impl From<ActionError> for ApiError {
    fn from(error: ActionError) -> Self {
        match error {
            ActionError::Conflict(current) => ApiError::conflict(format!(
                "the item is {} now{}",
                current.status.as_str(),
                current
                    .claimed_by
                    .map(|u| format!(", held by {u}"))
                    .unwrap_or_default()
            ))
            .with_field("current", &current),
            ActionError::Precondition(item) => ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                "precondition_failed",
                format!(
                    "the item changed: it is at version {} (review it again before acting)",
                    item.version
                ),
            )
            .with_field("current", &ItemView::from(*item)),
            ActionError::NoDraft(item) => ApiError::new(
                StatusCode::CONFLICT,
                "no_draft",
                "the item holds no draft to send: write the reply, or wait for the agent's draft",
            )
            .with_field("current", &ItemView::from(*item)),
            ActionError::StaleDraft(item) => ApiError::new(
                StatusCode::CONFLICT,
                "stale_draft",
                "the draft answers an older customer message: review the conversation again",
            )
            .with_field("current", &ItemView::from(*item)),
            ActionError::LiveItem {
                current,
                live_item_id,
            } => ApiError::conflict(format!(
                "the conversation already has a live item ({live_item_id}): act on that one"
            ))
            .with_field(
                "current",
                &json!({
                    "status": current.status,
                    "version": current.version,
                    "claimed_by": current.claimed_by,
                    "live_item_id": live_item_id,
                }),
            ),
            ActionError::NotFound => ApiError::not_found("queue item"),
            ActionError::Forbidden => ApiError::forbidden(),
            ActionError::Invalid(message) => ApiError::validation(message),
            ActionError::Store(e) => e.into(),
            ActionError::Injected(e) => ApiError::internal(e),
        }
    }
}
