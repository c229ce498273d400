//! The audit log for an org's admins (`GET /audit`): who did what, filtered by actor,
//! action and time. As JSON it pages newest first with an opaque cursor; with
//! `Accept: text/csv` or `application/x-ndjson` it streams the whole filtered range, oldest
//! first, through `export.rs` (bounded memory, one snapshot). The operator's deployment-wide
//! export is `switchboard admin audit-export`, on the same statement.

use crate::auth::Caller;
use crate::error::responses::{NotAdmin, Unauthorized};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Query};
use crate::http::export::{self, Format};
use crate::http::pagination;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_domain::Role;
use switchboard_store::audit::{self, Filter, RowFormat};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    /// One org (default: every org where the caller is an admin).
    org_id: Option<Uuid>,
    /// Rows of this user.
    actor: Option<Uuid>,
    /// Rows of this action, e.g. `customer.erased`.
    action: Option<String>,
    /// From this time (RFC 3339, inclusive).
    since: Option<DateTime<Utc>>,
    /// Before this time (RFC 3339, exclusive).
    until: Option<DateTime<Utc>>,
    /// JSON pages only.
    cursor: Option<String>,
    /// JSON pages only (1 to 200, default 50).
    limit: Option<i64>,
}

/// A page of audit rows, newest first. Each row: `id`, `created_at`, `org_id`,
/// `actor_user_id`, `actor_email`, `action`, `target_type`, `target_id`, `request_id`,
/// `details`.
#[derive(Serialize, ToSchema)]
struct AuditPage {
    items: Vec<Value>,
    next_cursor: Option<String>,
}

fn encode_cursor(id: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("audit|{id}"))
}

fn decode_cursor(cursor: &str) -> Result<i64, ApiError> {
    let invalid = || ApiError::bad_request("invalid_cursor", "cursor is not one this API issued");
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    text.strip_prefix("audit|")
        .and_then(|id| id.parse().ok())
        .ok_or_else(invalid)
}

#[utoipa::path(get, path = "/audit", tag = "orgs", security(("bearer" = [])), params(AuditQuery,
        ("Accept" = Option<String>, Header, description = "`text/csv` or `application/x-ndjson` \
            streams the whole filtered range, oldest first; otherwise JSON pages, newest first")),
    description = "The audit log of the orgs the caller administers: every expert action, \
        connection, member and settings change, note, replay, retry, erasure and login",
    responses((status = 200, body = AuditPage),
        (status = 400, body = ErrorBody),
        Unauthorized, NotAdmin,
        (status = 422, body = ErrorBody)))]
async fn list_audit(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<AuditQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let orgs = caller.scope(q.org_id, Role::Admin)?;
    if let (Some(since), Some(until)) = (q.since, q.until)
        && since >= until
    {
        return Err(ApiError::validation("since must be before until"));
    }
    if q.action
        .as_deref()
        .is_some_and(|a| a.is_empty() || a.len() > 100)
    {
        return Err(ApiError::validation("action must be 1 to 100 characters"));
    }
    let filter = Filter {
        orgs: Some(orgs),
        actor: q.actor,
        action: q.action.clone(),
        since: q.since,
        until: q.until,
    };
    let format = Format::from_accept(&headers, true);
    if format != Format::Json {
        let (row, extension) = match format {
            Format::Csv => (RowFormat::Csv, "csv"),
            _ => (RowFormat::Json, "ndjson"),
        };
        return Ok(export::stream(
            state.db.clone(),
            audit::export_sections(&filter, row),
            format,
            &format!("audit.{extension}"),
        ));
    }
    let limit = pagination::limit(q.limit)?;
    let cursor = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let rows = audit::page(&state.db, &filter, cursor, limit + 1).await?;
    let mut items = rows
        .iter()
        .map(|r| serde_json::from_str::<Value>(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ApiError::internal)?;
    let more = pagination::truncate(&mut items, limit);
    let next_cursor = more
        .then(|| {
            items
                .last()
                .and_then(|r| r["id"].as_i64())
                .map(encode_cursor)
        })
        .flatten();
    Ok(Json(AuditPage { items, next_cursor }).into_response())
}
