//! Conversations for the console: a list, and one conversation with its customer, its live
//! queue item and its messages (newest first, `?before=` pages back). Scoped to the
//! caller's orgs: another org's conversation is 403.

use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::error::responses::{OutOfScope, Unauthorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Path, Query};
use crate::http::expert_queue::{CustomerView, ItemView};
use crate::http::pagination::{self, Paging};
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use switchboard_domain::{Author, ChannelKind, DeliveryStatus, Role};
use switchboard_store::conversations::{self, ConversationFilter, ConversationRow, MessageRow};
use switchboard_store::expert_queue;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(show))
}

#[derive(Debug, Serialize, ToSchema)]
struct ConversationView {
    id: Uuid,
    org_id: Uuid,
    channel: ChannelKind,
    connection_id: Uuid,
    status: String,
    customer: CustomerView,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<ConversationRow> for ConversationView {
    fn from(r: ConversationRow) -> Self {
        ConversationView {
            id: r.id,
            org_id: r.org_id,
            channel: r.channel,
            connection_id: r.connection_id,
            status: r.status,
            customer: CustomerView {
                id: r.customer_id,
                display_name: r.customer_name,
                external_id: r.customer_external_id,
            },
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    org_id: Option<Uuid>,
    status: Option<String>,
    #[serde(default, deserialize_with = "crate::extract::empty_as_none")]
    channel: Option<ChannelKind>,
    customer_id: Option<Uuid>,
    cursor: Option<String>,
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ConversationPage)]
struct ListResponse {
    items: Vec<ConversationView>,
    next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/conversations", tag = "conversations", security(("bearer" = [])), params(ListQuery),
    responses((status = 200, body = ListResponse),
        (status = 400, body = ErrorBody),
        Unauthorized, OutOfScope,
        (status = 422, body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListResponse>> {
    let orgs = caller.scope(q.org_id, Role::Expert)?;
    let status = match q.status.as_deref() {
        None | Some("") => None,
        Some(s @ ("open" | "closed")) => Some(s.to_owned()),
        Some(_) => return Err(ApiError::validation("status must be open or closed")),
    };
    let paging = Paging::read(q.limit, q.cursor.as_deref())?;
    let filter = ConversationFilter {
        orgs,
        status,
        channel: q.channel,
        customer_id: q.customer_id,
        after: paging.after,
        limit: paging.fetch(),
    };
    let rows = conversations::list(&state.db, &filter).await?;
    let (items, next_cursor) = paging.page(rows, |r| (r.updated_at, r.id), ConversationView::from);
    Ok(Json(ListResponse { items, next_cursor }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ShowQuery {
    /// A message id: return messages older than it.
    before: Option<Uuid>,
    limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
struct MessageView {
    id: Uuid,
    direction: String,
    author: Author,
    author_user_id: Option<Uuid>,
    body: String,
    created_at: DateTime<Utc>,
    /// Outbound messages only.
    delivery: Option<Delivery>,
    /// Admins, a reply that differs from the agent's draft it was made from: that draft
    /// (the console shows the word diff).
    draft: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Delivery {
    status: DeliveryStatus,
    provider_message_id: Option<String>,
    delivered_at: Option<DateTime<Utc>>,
    error: Option<String>,
}

impl MessageView {
    /// The message as `admin` (or not) may see it.
    fn seen_by(m: MessageRow, admin: bool) -> Self {
        let draft = m.draft.filter(|d| admin && *d != m.body);
        MessageView {
            draft,
            delivery: m.delivery_status.map(|status| Delivery {
                status,
                provider_message_id: m.provider_message_id,
                delivered_at: m.delivered_at,
                error: m.delivery_error,
            }),
            id: m.id,
            direction: m.direction,
            author: m.author,
            author_user_id: m.author_user_id,
            body: m.body,
            created_at: m.created_at,
        }
    }
}

#[derive(Serialize, ToSchema)]
struct ShowResponse {
    #[serde(flatten)]
    conversation: ConversationView,
    queue_item: Option<ItemView>,
    /// Newest first.
    messages: Vec<MessageView>,
    /// Pass as `before` for the next older page; absent on the oldest page.
    next_before: Option<Uuid>,
}

#[utoipa::path(get, path = "/conversations/{id}", tag = "conversations", security(("bearer" = [])), params(("id" = Uuid, Path), ShowQuery),
    responses((status = 200, body = ShowResponse),
        Unauthorized, OutOfScope,
        (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Query(q): Query<ShowQuery>,
) -> ApiResult<Json<ShowResponse>> {
    let conversation = conversations::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    let admin = caller.role_in(conversation.org_id)? == Role::Admin;
    let limit = pagination::limit(q.limit)?;
    let mut messages = conversations::messages(&state.db, id, q.before, limit + 1).await?;
    let more = pagination::truncate(&mut messages, limit);
    let next_before = more.then(|| messages.last().map(|m| m.id)).flatten();
    let queue_item = match conversations::live_item(&state.db, id).await? {
        Some(item) => expert_queue::get(&state.db, item)
            .await?
            .map(ItemView::from),
        None => None,
    };
    Ok(Json(ShowResponse {
        conversation: conversation.into(),
        queue_item,
        messages: messages
            .into_iter()
            .map(|m| MessageView::seen_by(m, admin))
            .collect(),
        next_before,
    }))
}
