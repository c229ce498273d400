//! Reports of the scheduled jobs (daily summary, weekly report, review summary) for the
//! members of an org, newest first, and the org setting they depend on (its time zone).

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, Query, RequestId};
use crate::http::pagination;
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use switchboard_domain::{ReportKind, Role};
use switchboard_store::audit::{self, Actor};
use switchboard_store::orgs::{self, OrgSettings};
use switchboard_store::reports::{self, Report};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(get_settings, update_settings))
}

/// A stored report.
#[derive(Serialize, ToSchema)]
struct ReportView {
    id: Uuid,
    org_id: Uuid,
    kind: ReportKind,
    period_start: DateTime<Utc>,
    period_end: DateTime<Utc>,
    /// The org's time zone the period was cut in.
    time_zone: String,
    /// Daily and weekly: conversations, messages_in, messages_out,
    /// median_first_response_secs, releases, fallbacks, dead_letters. Review: flagged,
    /// oldest_created_at, items.
    #[schema(value_type = Object)]
    data: serde_json::Value,
    created_at: DateTime<Utc>,
}

impl From<Report> for ReportView {
    fn from(r: Report) -> Self {
        ReportView {
            id: r.id,
            org_id: r.org_id,
            kind: r.kind,
            period_start: r.period_start,
            period_end: r.period_end,
            time_zone: r.time_zone,
            data: r.data,
            created_at: r.created_at,
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// One of the caller's orgs; all of them when absent.
    org_id: Option<Uuid>,
    #[serde(default, deserialize_with = "crate::extract::empty_as_none")]
    kind: Option<ReportKind>,
    cursor: Option<String>,
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ReportPage)]
struct ListResponse {
    items: Vec<ReportView>,
    next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/reports", tag = "reports", security(("bearer" = [])), params(ListQuery),
    description = "Reports of the caller's orgs, newest first",
    responses((status = 200, body = ListResponse), (status = 400, body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "Not a member of the org", body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListResponse>> {
    let orgs = caller.scope(q.org_id, Role::Expert)?;
    let limit = pagination::limit(q.limit)?;
    let after = q.cursor.as_deref().map(pagination::decode).transpose()?;
    let rows = reports::list(&state.db, &orgs, q.kind, after, limit + 1).await?;
    let (rows, next_cursor) = pagination::page(rows, limit, |r| (r.created_at, r.id));
    Ok(Json(ListResponse {
        items: rows.into_iter().map(ReportView::from).collect(),
        next_cursor,
    }))
}

/// An org's settings.
#[derive(Serialize, ToSchema)]
struct SettingsView {
    id: Uuid,
    name: String,
    /// IANA time zone (e.g. `Europe/Berlin`) the org's daily and weekly reports follow.
    time_zone: String,
}

impl From<OrgSettings> for SettingsView {
    fn from(o: OrgSettings) -> Self {
        SettingsView {
            id: o.id,
            name: o.name,
            time_zone: o.time_zone,
        }
    }
}

#[derive(Deserialize, ToSchema)]
struct SettingsUpdate {
    /// IANA time zone name.
    time_zone: String,
}

#[utoipa::path(get, path = "/orgs/{org_id}/settings", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)),
    responses((status = 200, body = SettingsView),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "Not a member of the org", body = ErrorBody)))]
async fn get_settings(
    State(state): State<AppState>,
    caller: Caller,
    Path(org_id): Path<Uuid>,
) -> ApiResult<Json<SettingsView>> {
    caller.role_in(org_id)?;
    let org = orgs::settings(&state.db, org_id)
        .await?
        .ok_or_else(|| ApiError::not_found("org"))?;
    Ok(Json(org.into()))
}

#[utoipa::path(patch, path = "/orgs/{org_id}/settings", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)), request_body = SettingsUpdate,
    responses((status = 200, body = SettingsView), (status = 400, body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "Not an admin of the org", body = ErrorBody),
        (status = 422, description = "Not a known time zone", body = ErrorBody)))]
async fn update_settings(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(org_id): Path<Uuid>,
    Json(body): Json<SettingsUpdate>,
) -> ApiResult<Json<SettingsView>> {
    caller.require_admin(org_id)?;
    let zone = body
        .time_zone
        .parse::<chrono_tz::Tz>()
        .map_err(|_| ApiError::validation("time_zone must be an IANA time zone name"))?;
    let org = orgs::set_time_zone(&state.db, org_id, zone.name())
        .await?
        .ok_or_else(|| ApiError::not_found("org"))?;
    audit::record(
        &state.db,
        Actor {
            org_id: Some(org_id),
            user_id: Some(caller.user_id),
            request_id: request_id.as_deref(),
        },
        "org.settings_updated",
        None,
        json!({"time_zone": zone.name()}),
    )
    .await?;
    Ok(Json(org.into()))
}
