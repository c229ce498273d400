//! Channel connections CRUD for org admins. Secrets go in encrypted and never come out;
//! what a `PATCH` does to them (rotation with an overlap) is in `connection_secrets`.

use super::connection_secrets::{self, SecretField, UpdateRequest};
use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::error::responses::{OutOfScope, Unauthorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Path, Query, RequestId};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchboard_domain::{ChannelKind, Role};
use switchboard_flows::connections::{self as flow, Change, ConnectionError};
use switchboard_store::connections::{self, Connection, NewConnection, Secrets};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show, update, remove))
}

#[derive(Deserialize, ToSchema)]
struct CreateRequest {
    org_id: Uuid,
    channel: String,
    name: String,
    secrets: Value,
    #[serde(default)]
    settings: Option<Value>,
}

/// A connection as returned by the API: never with secrets, always with its webhook URL.
#[derive(Serialize, ToSchema)]
struct ConnectionView {
    #[serde(flatten)]
    connection: Connection,
    webhook_url: String,
    /// The channel's secret fields by name, with which values are active until when (a
    /// rotation's overlap); never a value.
    secret_fields: Vec<SecretField>,
}

impl ConnectionView {
    fn new(state: &AppState, connection: Connection) -> Self {
        let webhook_url = state
            .config
            .webhook_url(connection.channel.as_str(), &connection.id.to_string());
        let secret_fields = connection_secrets::secret_fields_of(&connection, chrono::Utc::now());
        Self {
            connection,
            webhook_url,
            secret_fields,
        }
    }
}

impl From<ConnectionError> for ApiError {
    fn from(e: ConnectionError) -> Self {
        match e {
            ConnectionError::NameTaken { .. } => ApiError::conflict(e.to_string()),
            ConnectionError::NotFound => ApiError::not_found("channel connection"),
            ConnectionError::Store(e) => e.into(),
        }
    }
}

#[utoipa::path(post, path = "/channel-connections", tag = "channel-connections", security(("bearer" = [])),
    request_body = CreateRequest,
    responses((status = 201, body = ConnectionView),
        (status = 400, body = ErrorBody),
        Unauthorized, OutOfScope,
        (status = 409, description = "A live connection with this name exists", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Json(body): Json<CreateRequest>,
) -> ApiResult<(StatusCode, Json<ConnectionView>)> {
    caller.require_admin(body.org_id)?;
    let channel: ChannelKind = body.channel.parse().map_err(|()| {
        ApiError::validation("channel must be one of slack, whatsapp, telegram, email")
    })?;
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::validation("name must be 1 to 200 characters"));
    }
    switchboard_channels::validate_secrets(channel, &body.secrets)
        .map_err(|e| ApiError::validation(e.to_string()))?;
    let settings = body.settings.unwrap_or_else(|| json!({}));
    if !settings.is_object() {
        return Err(ApiError::validation("settings must be an object"));
    }
    let new = NewConnection {
        org_id: body.org_id,
        channel,
        name,
        secrets: &body.secrets,
        settings: &settings,
    };
    let actor = caller.actor(body.org_id, request_id.as_deref());
    let cache = &state.connections;
    let connection = flow::create(&state.flows, &state.cipher, cache, actor, new).await?;
    Ok((
        StatusCode::CREATED,
        Json(ConnectionView::new(&state, connection)),
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    org_id: Option<Uuid>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ConnectionList)]
struct ListResponse {
    items: Vec<ConnectionView>,
}

#[utoipa::path(get, path = "/channel-connections", tag = "channel-connections", security(("bearer" = [])),
    params(ListQuery),
    responses((status = 200, body = ListResponse),
        Unauthorized, OutOfScope))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<ListResponse>> {
    let orgs = caller.scope(query.org_id, Role::Admin)?;
    let items = connections::list(&state.db, &orgs)
        .await?
        .into_iter()
        .map(|c| ConnectionView::new(&state, c))
        .collect();
    Ok(Json(ListResponse { items }))
}

/// Loads a connection and checks the caller administers its org: 404 if there is no such
/// connection, 403 if it belongs to an org the caller does not administer.
async fn load_owned(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Connection> {
    let connection = connections::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel connection"))?;
    caller.require_admin(connection.org_id)?;
    Ok(connection)
}

#[utoipa::path(get, path = "/channel-connections/{id}", tag = "channel-connections", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses((status = 200, body = ConnectionView),
        Unauthorized, OutOfScope,
        (status = 404, body = ErrorBody)))]
async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<ConnectionView>> {
    let connection = load_owned(&state, &caller, id).await?;
    Ok(Json(ConnectionView::new(&state, connection)))
}

/// Changes a connection's name, settings or secrets in place; its id and webhook URL stay.
///
/// A new webhook-verifying secret leaves the one it replaces verifying until
/// `previous_secret_expires_in_secs` (default a day); every other secret switches at once.
/// Every pod uses the change within moments.
#[utoipa::path(patch, path = "/channel-connections/{id}", tag = "channel-connections", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    request_body = UpdateRequest,
    responses((status = 200, description = "Updated: `secret_fields` shows which values now verify until when", body = ConnectionView),
        (status = 400, description = "Not JSON", body = ErrorBody), Unauthorized, OutOfScope, (status = 404, body = ErrorBody),
        (status = 409, description = "A live connection with this name exists", body = ErrorBody),
        (status = 422, description = "An unknown or invalid field, or nothing to change; nothing was written", body = ErrorBody)))]
async fn update(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
    Json(body): Json<Value>,
) -> ApiResult<Json<ConnectionView>> {
    // 404/403 before any lock is taken; the flow then locks the row from the read of its
    // secrets to the commit, so two admins' changes apply one after the other.
    let org_id = load_owned(&state, &caller, id).await?.org_id;
    let actor = caller.actor(org_id, request_id.as_deref());
    let plan = |connection: &Connection, stored: &Secrets| {
        let plan = connection_secrets::plan(connection, stored, body, chrono::Utc::now())?;
        Ok::<_, ApiError>(Change {
            audit: plan.audit_details(),
            name: plan.name,
            settings: plan.settings,
            secrets: plan.secrets,
        })
    };
    // Every pod drops its cached copy (Redis pub/sub, see `connection_cache`): webhooks
    // everywhere verify with the new secrets within moments.
    let cache = &state.connections;
    let updated = flow::update(&state.flows, &state.cipher, cache, actor, id, plan).await?;
    Ok(Json(ConnectionView::new(&state, updated)))
}

#[utoipa::path(delete, path = "/channel-connections/{id}", tag = "channel-connections", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"),
        Unauthorized, OutOfScope,
        (status = 404, body = ErrorBody)))]
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    let org_id = load_owned(&state, &caller, id).await?.org_id;
    let actor = caller.actor(org_id, request_id.as_deref());
    flow::delete(&state.flows, &state.connections, actor, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
