//! Channel connections CRUD for org admins. Secrets go in encrypted and never come out;
//! what a `PATCH` does to them (rotation with an overlap) is in `connection_secrets`.

use super::connection_secrets::{self, SecretField, UpdateRequest};
use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Path, Query, RequestId};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchboard_domain::{ChannelKind, Role};
use switchboard_store::StoreError;
use switchboard_store::audit::{self, Actor};
use switchboard_store::connections::{self, Changes, Connection, NewConnection};
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

/// 409 for a name another live connection of the org and channel has.
fn name_taken(error: StoreError, channel: ChannelKind, name: &str) -> ApiError {
    match error {
        StoreError::Conflict => ApiError::conflict(format!(
            "a {channel} connection named {name:?} already exists"
        )),
        other => other.into(),
    }
}

#[utoipa::path(post, path = "/channel-connections", tag = "channel-connections", security(("bearer" = [])),
    request_body = CreateRequest,
    responses((status = 201, body = ConnectionView), (status = 400, body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 403, description = "Another org's resource, or the role is too low", body = ErrorBody),
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
    let connection = connections::create(
        &state.db,
        &state.cipher,
        NewConnection {
            org_id: body.org_id,
            channel,
            name,
            secrets: &body.secrets,
            settings: &settings,
        },
    )
    .await
    .map_err(|e| name_taken(e, channel, name))?;
    // Every pod may remember this id as unknown (a webhook that raced the create): forget it.
    state.connections.invalidate(connection.id).await;
    audit::record(
        &state.db,
        Actor {
            org_id: Some(connection.org_id),
            user_id: Some(caller.user_id),
            request_id: request_id.as_deref(),
        },
        "channel_connection.created",
        Some(("channel_connection", connection.id)),
        json!({"channel": channel, "name": connection.name}),
    )
    .await?;
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
    params(ListQuery), responses((status = 200, body = ListResponse), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 403, description = "Another org's resource, or the role is too low", body = ErrorBody)))]
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
    responses((status = 200, body = ConnectionView), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 403, description = "Another org's resource, or the role is too low", body = ErrorBody), (status = 404, body = ErrorBody)))]
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
        (status = 400, description = "Not JSON", body = ErrorBody), (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "Another org's resource, or the role is too low", body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "A live connection with this name exists", body = ErrorBody),
        (status = 422, description = "An unknown or invalid field, or nothing to change; nothing was written", body = ErrorBody)))]
async fn update(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
    Json(body): Json<Value>,
) -> ApiResult<Json<ConnectionView>> {
    // 404/403 before any lock is taken. The row is then locked from the read of its
    // secrets to the commit, so two admins' changes apply one after the other.
    load_owned(&state, &caller, id).await?;
    let mut tx = state.db.begin().await.map_err(StoreError::from)?;
    let (connection, stored) = connections::lock_with_secrets(&mut tx, &state.cipher, id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel connection"))?;
    // A refusal drops `tx`, which rolls back: nothing is written.
    let plan = connection_secrets::plan(&connection, &stored, body, chrono::Utc::now())?;
    let changes = Changes {
        name: plan.name.as_deref(),
        settings: plan.settings.as_ref(),
        secrets: Some(&plan.secrets),
    };
    let updated = connections::update(&mut tx, &state.cipher, id, changes)
        .await
        .map_err(|e| {
            name_taken(
                e,
                connection.channel,
                plan.name.as_deref().unwrap_or_default(),
            )
        })?
        .ok_or_else(|| ApiError::not_found("channel connection"))?;
    audit::record(
        &mut *tx,
        Actor {
            org_id: Some(updated.org_id),
            user_id: Some(caller.user_id),
            request_id: request_id.as_deref(),
        },
        "channel_connection.updated",
        Some(("channel_connection", id)),
        plan.audit_details(),
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    // Every pod drops its cached copy (Redis pub/sub, see `connection_cache`): webhooks
    // everywhere verify with the new secrets within moments.
    state.connections.invalidate(id).await;
    Ok(Json(ConnectionView::new(&state, updated)))
}

#[utoipa::path(delete, path = "/channel-connections/{id}", tag = "channel-connections", security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, description = "No valid bearer token", body = ErrorBody), (status = 403, description = "Another org's resource, or the role is too low", body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    load_owned(&state, &caller, id).await?;
    let deleted = connections::delete(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel connection"))?;
    state.connections.invalidate(id).await;
    audit::record(
        &state.db,
        Actor {
            org_id: Some(deleted.org_id),
            user_id: Some(caller.user_id),
            request_id: request_id.as_deref(),
        },
        "channel_connection.deleted",
        Some(("channel_connection", deleted.id)),
        json!({}),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
