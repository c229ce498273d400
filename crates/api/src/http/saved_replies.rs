//! Saved replies: an org's snippets for the reply box, with `{{customer.name}}`-style
//! placeholders that the console fills from the conversation's customer and the logged-in
//! expert before the expert sees (and may edit) the text; nothing is filled on the server,
//! so what the expert sent is what they saw (SPEC §11). Admins manage them, experts list
//! them. A placeholder the console cannot fill is refused when the reply is saved (422
//! naming it), never discovered while a customer waits.

use crate::auth::Caller;
use crate::error::responses::Unauthorized;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, RequestId};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use switchboard_domain::Role;
use switchboard_flows::saved_replies::{self as flow, SavedReplyError};
use switchboard_store::saved_replies::{self, SavedReply};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// The placeholders the console knows how to fill (console/src/saved-replies.ts renders
/// them; keep the two lists the same).
pub const PLACEHOLDERS: [&str; 4] = [
    "customer.name",
    "customer.first_name",
    "expert.name",
    "expert.first_name",
];

const MAX_NAME: usize = 100;
const MAX_BODY: usize = 4000;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(update, remove))
}

/// A saved reply as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
struct SavedReplyView {
    id: Uuid,
    org_id: Uuid,
    name: String,
    /// The text with its placeholders, unfilled.
    body: String,
    created_by: Option<Uuid>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<SavedReply> for SavedReplyView {
    fn from(r: SavedReply) -> Self {
        SavedReplyView {
            id: r.id,
            org_id: r.org_id,
            name: r.name,
            body: r.body,
            created_by: r.created_by,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[derive(Serialize, ToSchema)]
struct SavedReplyList {
    /// By name.
    items: Vec<SavedReplyView>,
    /// The placeholder names a body may use, as `{{name}}`.
    placeholders: Vec<&'static str>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateSavedReply {
    name: String,
    body: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct UpdateSavedReply {
    name: Option<String>,
    body: Option<String>,
}

/// Every `{{…}}` in `body` that is not a known placeholder (in order, once each), and
/// whether a `{{` is left unclosed.
fn unknown_placeholders(body: &str) -> (Vec<String>, bool) {
    let mut unknown: Vec<String> = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return (unknown, true);
        };
        let name = after[..end].trim();
        if !PLACEHOLDERS.contains(&name) && !unknown.iter().any(|u| u == name) {
            unknown.push(name.to_owned());
        }
        rest = &after[end + 2..];
    }
    (unknown, false)
}

fn valid_name(name: &str) -> ApiResult<&str> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(ApiError::validation(format!(
            "name must be 1 to {MAX_NAME} characters"
        )));
    }
    Ok(name)
}

fn valid_body(body: &str) -> ApiResult<&str> {
    if body.trim().is_empty() || body.chars().count() > MAX_BODY {
        return Err(ApiError::validation(format!(
            "body must be 1 to {MAX_BODY} characters"
        )));
    }
    let (unknown, unclosed) = unknown_placeholders(body);
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|u| format!("{{{{{u}}}}}")).collect();
        return Err(ApiError::validation(format!(
            "unknown placeholder(s): {}; known: {}",
            names.join(", "),
            PLACEHOLDERS.map(|p| format!("{{{{{p}}}}}")).join(", ")
        ))
        .with_field("unknown_placeholders", &unknown));
    }
    if unclosed {
        return Err(ApiError::validation(
            "a placeholder is not closed: write it as {{customer.name}}",
        ));
    }
    Ok(body)
}

impl From<SavedReplyError> for ApiError {
    fn from(e: SavedReplyError) -> Self {
        match e {
            SavedReplyError::NameTaken(_) => ApiError::conflict(e.to_string()),
            SavedReplyError::NotFound => ApiError::not_found("saved reply"),
            SavedReplyError::Store(e) => e.into(),
        }
    }
}

#[utoipa::path(get, path = "/orgs/{org_id}/saved-replies", tag = "saved-replies", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)),
    responses((status = 200, body = SavedReplyList),
        Unauthorized,
        (status = 403, description = "Not a member of this org", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(org_id): Path<Uuid>,
) -> ApiResult<Json<SavedReplyList>> {
    caller.require(org_id, Role::Expert)?;
    let rows = saved_replies::list(&state.db, org_id).await?;
    Ok(Json(SavedReplyList {
        items: rows.into_iter().map(SavedReplyView::from).collect(),
        placeholders: PLACEHOLDERS.to_vec(),
    }))
}

#[utoipa::path(post, path = "/orgs/{org_id}/saved-replies", tag = "saved-replies", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)), request_body = CreateSavedReply,
    responses((status = 201, body = SavedReplyView),
        (status = 400, body = ErrorBody),
        Unauthorized,
        (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 409, description = "The org has a saved reply of this name", body = ErrorBody),
        (status = 422, description = "Empty or too long, or an unknown placeholder (named in `unknown_placeholders`)", body = ErrorBody)))]
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(org_id): Path<Uuid>,
    Json(req): Json<CreateSavedReply>,
) -> ApiResult<(StatusCode, Json<SavedReplyView>)> {
    caller.require_admin(org_id)?;
    let name = valid_name(&req.name)?;
    let body = valid_body(&req.body)?;
    let actor = caller.actor(org_id, request_id.as_deref());
    let reply = flow::create(&state.flows, actor, org_id, caller.user_id, name, body).await?;
    Ok((StatusCode::CREATED, Json(reply.into())))
}

#[utoipa::path(patch, path = "/orgs/{org_id}/saved-replies/{id}", tag = "saved-replies", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("id" = Uuid, Path)), request_body = UpdateSavedReply,
    responses((status = 200, body = SavedReplyView),
        (status = 400, body = ErrorBody),
        Unauthorized,
        (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "The org has no such saved reply", body = ErrorBody),
        (status = 409, description = "The org has another saved reply of this name", body = ErrorBody),
        (status = 422, description = "Nothing to change, empty or too long, or an unknown placeholder", body = ErrorBody)))]
async fn update(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, id)): Path<(Uuid, Uuid)>,
    Json(req): Json<UpdateSavedReply>,
) -> ApiResult<Json<SavedReplyView>> {
    caller.require_admin(org_id)?;
    if req.name.is_none() && req.body.is_none() {
        return Err(ApiError::validation("give a name, a body or both"));
    }
    let name = req.name.as_deref().map(valid_name).transpose()?;
    let body = req.body.as_deref().map(valid_body).transpose()?;
    let actor = caller.actor(org_id, request_id.as_deref());
    let reply = flow::update(&state.flows, actor, org_id, id, name, body).await?;
    Ok(Json(reply.into()))
}

#[utoipa::path(delete, path = "/orgs/{org_id}/saved-replies/{id}", tag = "saved-replies", security(("bearer" = [])),
    params(("org_id" = Uuid, Path), ("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"),
        Unauthorized,
        (status = 403, description = "Not an admin of this org", body = ErrorBody),
        (status = 404, description = "The org has no such saved reply", body = ErrorBody)))]
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path((org_id, id)): Path<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    let actor = caller.admin_actor(org_id, request_id.as_deref())?;
    flow::delete(&state.flows, actor, org_id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::unknown_placeholders;

    #[test]
    fn finds_unknown_placeholders_once_each() {
        assert_eq!(
            unknown_placeholders("Hi {{customer.name}}, {{ expert.name }} here"),
            (vec![], false)
        );
        assert_eq!(
            unknown_placeholders("{{order.id}} {{x}} {{order.id}} {{customer.name}}"),
            (vec!["order.id".to_owned(), "x".to_owned()], false)
        );
        assert_eq!(unknown_placeholders("Hi {{customer.name"), (vec![], true));
        assert_eq!(
            unknown_placeholders("no placeholders {here}"),
            (vec![], false)
        );
    }
}
