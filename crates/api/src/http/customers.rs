//! Customer context for the console: the customer's conversations (this one and the earlier
//! ones) with how each stands, so an expert sees the history before answering. One customer
//! record only: records of the same person on other channels are not linked here. Scoped to
//! the caller's orgs: another org's customer is 403, an unknown one 404.

use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Path, Query};
use crate::http::pagination;
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use switchboard_domain::ChannelKind;
use switchboard_store::customers::{self, CustomerConversationRow};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(conversations))
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
    responses((status = 200, body = ContextResponse), (status = 400, body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 403, description = "Another org's customer", body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
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
    let limit = pagination::limit(q.limit)?;
    let after = q.cursor.as_deref().map(pagination::decode).transpose()?;
    let rows =
        customers::conversations(&state.db, customer.org_id, customer.id, after, limit + 1).await?;
    let (rows, next_cursor) = pagination::page(rows, limit, |r| (r.updated_at, r.id));
    Ok(Json(ContextResponse {
        customer: ContextCustomer {
            id: customer.id,
            org_id: customer.org_id,
            channel: customer.channel,
            display_name: customer.display_name,
            external_id: customer.external_id,
        },
        items: rows.into_iter().map(CustomerConversation::from).collect(),
        next_cursor,
    }))
}
