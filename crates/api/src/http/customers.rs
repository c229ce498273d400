//! Customer context for the console: the customer's conversations (this one and the earlier
//! ones) with how each stands, so an expert sees the history before answering. One customer
//! record only: records of the same person on other channels are not linked here. Scoped to
//! the caller's orgs: another org's customer is 403, an unknown one 404.
//!
//! An org admin can also erase a customer (`POST /customers/{id}/erase`): the request is
//! recorded and run at once; what cannot finish now (a reply in flight, a pod that dies
//! mid-way) the `customer-erasure` job finishes, and `GET /customers/{id}/erasure` says how
//! it stands. Both answer for an erased customer, whose record is gone, from the erasure.

use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::error::responses::Unauthorized;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Path, Query, RequestId};
use crate::http::pagination::Paging;
use crate::idempotency::{Begin, Idempotent};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use switchboard_domain::ChannelKind;
use switchboard_store::StoreError;
use switchboard_store::customer_erasures::{self, Counts, ErasureRow};
use switchboard_store::customers::{self, CustomerConversationRow};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(conversations))
        .routes(routes!(erase))
        .routes(routes!(erasure))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContextQuery {
    cursor: Option<String>,
    limit: Option<i64>,
}

/// The customer record.
#[derive(Debug, Serialize, ToSchema)]
struct ContextCustomer {
    id: Uuid,
    org_id: Uuid,
    channel: ChannelKind,
    display_name: Option<String>,
    external_id: String,
}

/// One of the customer's conversations.
#[derive(Debug, Serialize, ToSchema)]
struct CustomerConversation {
    id: Uuid,
    channel: ChannelKind,
    /// `open` or `closed`.
    status: String,
    /// How it stands: the live queue item's status (`pending`, `claimed`,
    /// `awaiting_client`, `snoozed`), or `resolved` when no item is live.
    outcome: String,
    queue_item_id: Option<Uuid>,
    /// When the newest message was written; absent for a conversation without messages.
    last_message_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<CustomerConversationRow> for CustomerConversation {
    fn from(r: CustomerConversationRow) -> Self {
        CustomerConversation {
            id: r.id,
            channel: r.channel,
            status: r.status,
            outcome: r.outcome,
            queue_item_id: r.queue_item_id,
            last_message_at: r.last_message_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[derive(Serialize, ToSchema)]
#[schema(as = CustomerConversationPage)]
struct ContextResponse {
    customer: ContextCustomer,
    /// Newest activity first.
    items: Vec<CustomerConversation>,
    next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/customers/{id}/conversations", tag = "conversations", security(("bearer" = [])), params(("id" = Uuid, Path), ContextQuery),
    responses((status = 200, body = ContextResponse),
        (status = 400, body = ErrorBody),
        Unauthorized,
        (status = 403, description = "Another org's customer", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn conversations(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    Query(q): Query<ContextQuery>,
) -> ApiResult<Json<ContextResponse>> {
    let customer = customers::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("customer"))?;
    caller.role_in(customer.org_id)?;
    let paging = Paging::read(q.limit, q.cursor.as_deref())?;
    let (org_id, after, fetch) = (customer.org_id, paging.after, paging.fetch());
    let rows = customers::conversations(&state.db, org_id, customer.id, after, fetch).await?;
    let (items, next_cursor) = paging.page(rows, |r| (r.updated_at, r.id), Into::into);
    Ok(Json(ContextResponse {
        customer: ContextCustomer {
            id: customer.id,
            org_id: customer.org_id,
            channel: customer.channel,
            display_name: customer.display_name,
            external_id: customer.external_id,
        },
        items,
        next_cursor,
    }))
}

/// A customer's erasure as the API shows it: ids, times and numbers, never what went.
#[derive(Debug, Serialize, ToSchema)]
struct ErasureView {
    id: Uuid,
    customer_id: Uuid,
    org_id: Uuid,
    /// `pending` (it runs, or waits for a reply in flight) or `done`.
    status: String,
    /// Rows removed per table, once done.
    counts: Option<Counts>,
    requested_by: Option<Uuid>,
    requested_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

impl ErasureView {
    fn answer(row: ErasureRow) -> (StatusCode, ErasureView) {
        let status = if row.status == "done" {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        };
        (
            status,
            ErasureView {
                id: row.id,
                customer_id: row.customer_id,
                org_id: row.org_id,
                status: row.status,
                counts: row.counts.map(|c| c.0),
                requested_by: row.requested_by,
                requested_at: row.requested_at,
                finished_at: row.finished_at,
            },
        )
    }
}

/// The org of customer `id`, or of their erasure once the record is gone (404 when neither
/// exists), with the erasure if there is one.
async fn customer_org(state: &AppState, id: Uuid) -> ApiResult<(Uuid, Option<ErasureRow>)> {
    let erasure = customer_erasures::by_customer(&state.db, id).await?;
    if let Some(row) = &erasure {
        return Ok((row.org_id, erasure));
    }
    let customer = customers::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("customer"))?;
    Ok((customer.org_id, None))
}

#[utoipa::path(post, path = "/customers/{id}/erase", tag = "conversations", security(("bearer" = [])),
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header, description = "Replays the first answer to a retry")),
    description = "Erases the customer (org admins): their record, conversations, messages both \
        ways, drafts, notes, queue items, replies and dead letters, inbox events (a tombstone of \
        each key's hash stays, so a provider's late retry is a duplicate), the realtime events \
        naming them (rewritten to `conversation_erased`) and stored answers naming them; consoles \
        drop their items live. A reply being sent is delivered first. The audit row holds ids and \
        counts only. Asking again answers the same erasure.",
    responses((status = 200, description = "Erased", body = ErasureView),
        (status = 202, description = "Recorded; it finishes once a reply or an inbox event in \
            flight is done (`GET /customers/{id}/erasure`)", body = ErasureView),
        Unauthorized,
        (status = 403, description = "Another org's customer, or not an admin", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The key's first request still runs", body = ErrorBody),
        (status = 422, description = "The key was used for another request", body = ErrorBody)))]
async fn erase(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
    req: Idempotent<IgnoredAny>,
) -> ApiResult<Response> {
    let (org_id, _) = customer_org(&state, id).await?;
    caller.require_admin(org_id)?;
    let guard = match req.begin(&state.db, org_id, caller.user_id).await? {
        Begin::Answer(response) => return Ok(response),
        Begin::Run(guard) => guard,
    };
    let answered = async {
        let mut conn = state.db.acquire().await.map_err(StoreError::from)?;
        let erasure = state.erasure();
        let (row, held) = customer_erasures::request(
            &mut conn,
            org_id,
            id,
            caller.user_id,
            request_id.as_deref(),
            erasure.lease,
        )
        .await?;
        if row.status != "done" {
            let attempt = if held {
                erasure.attempt_held(row.id).await
            } else {
                erasure.attempt(row.id).await
            };
            if let Err(error) = attempt {
                // Recorded: the `customer-erasure` job takes it up again.
                tracing::warn!(erasure_id = %row.id, %error, "customer erasure failed; it is retried");
            }
        }
        let row = customer_erasures::by_customer(&mut *conn, id)
            .await?
            .ok_or_else(|| ApiError::not_found("customer"))?;
        let (status, view) = ErasureView::answer(row);
        let body = serde_json::to_value(&view).map_err(ApiError::internal)?;
        if let Some(guard) = &guard {
            guard.complete_in(&mut conn, status, &body).await?;
        }
        Ok::<_, ApiError>((status, axum::Json(body)).into_response())
    }
    .await;
    match answered {
        Ok(response) => Ok(response),
        Err(error) => {
            if let Some(guard) = guard {
                guard.fail(&state.db, &error).await;
            }
            Err(error)
        }
    }
}

#[utoipa::path(get, path = "/customers/{id}/erasure", tag = "conversations", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses((status = 200, description = "Erased", body = ErasureView),
        (status = 202, description = "Still pending", body = ErasureView),
        Unauthorized,
        (status = 403, description = "Another org's customer, or not an admin", body = ErrorBody),
        (status = 404, description = "No such customer, or no erasure was asked for", body = ErrorBody)))]
async fn erasure(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    let (org_id, erasure) = customer_org(&state, id).await?;
    caller.require_admin(org_id)?;
    let row = erasure.ok_or_else(|| ApiError::not_found("erasure"))?;
    let (status, view) = ErasureView::answer(row);
    Ok((status, axum::Json(view)).into_response())
}
