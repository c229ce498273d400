//! Reports of the scheduled jobs (daily summary, weekly report, review summary) for the
//! members of an org, newest first, and the org's settings: the time zone the reports follow,
//! the account manager's address, and the SLA (`sla_minutes`) each new queue item is due by.
//! The reports page's numbers are in `report_metrics`.

use crate::auth::Caller;
use crate::error::responses::{NotAdmin, Unauthorized};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path, Query, RequestId};
use crate::http::pagination::Paging;
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use switchboard_domain::{ReportKind, Role};
use switchboard_flows::orgs::{self as flow, SettingsError};
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
        Unauthorized,
        (status = 403, description = "Not a member of the org", body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<ListResponse>> {
    let orgs = caller.scope(q.org_id, Role::Expert)?;
    let paging = Paging::read(q.limit, q.cursor.as_deref())?;
    let rows = reports::list(&state.db, &orgs, q.kind, paging.after, paging.fetch()).await?;
    let (items, next_cursor) = paging.page(rows, |r| (r.created_at, r.id), ReportView::from);
    Ok(Json(ListResponse { items, next_cursor }))
}

/// An org's settings.
#[derive(Serialize, ToSchema)]
struct SettingsView {
    id: Uuid,
    name: String,
    /// IANA time zone (e.g. `Europe/Berlin`) the org's daily and weekly reports follow.
    time_zone: String,
    /// Who is emailed when one of the org's replies is dead (`reply_dead`).
    account_manager_email: Option<String>,
    /// Minutes an expert has to answer a customer message: a queue item is due this long
    /// after the message that made it pending (`sla_due_at`).
    sla_minutes: i32,
    /// Days the org's conversations, inbox payloads, events, replies and stored answers
    /// are kept before the `org-retention` job deletes them; `null` keeps them until erased.
    retention_days: Option<i32>,
}

impl From<OrgSettings> for SettingsView {
    fn from(o: OrgSettings) -> Self {
        SettingsView {
            id: o.id,
            name: o.name,
            time_zone: o.time_zone,
            account_manager_email: o.account_manager_email,
            sla_minutes: o.sla_minutes,
            retention_days: o.retention_days,
        }
    }
}

/// The fields to change; an absent field stays as it is.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SettingsUpdate {
    /// IANA time zone name.
    time_zone: Option<String>,
    /// An email address, or `null` to stop the notices.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    account_manager_email: Option<Option<String>>,
    /// 1 to 10080 (a week); applies to items that become pending from now on.
    #[schema(minimum = 1, maximum = 10080)]
    sla_minutes: Option<i32>,
    /// 1 to 3650 days, or `null` to keep everything until erased.
    #[serde(default, deserialize_with = "present_days")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 3650)]
    retention_days: Option<Option<i32>>,
}

/// The longest retention window (ten years; the column's CHECK says the same).
const MAX_RETENTION_DAYS: i32 = 3650;

/// `retention_days` present (`Some`), even as `null` (`Some(None)`), as opposed to absent.
fn present_days<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i32>>, D::Error> {
    Option::<i32>::deserialize(d).map(Some)
}

/// The longest SLA an org may set (a week; the column's CHECK says the same).
const MAX_SLA_MINUTES: i32 = 10_080;

/// A field that is present (`Some`), even as `null` (`Some(None)`), as opposed to absent.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// A plausible single address (`local@domain.tld`, no spaces, angle brackets or list
/// separators, at most 320 characters). Delivery is the real check; this refuses typos and
/// lists.
fn plausible_email(address: &str) -> bool {
    let Some((local, domain)) = address.split_once('@') else {
        return false;
    };
    address.len() <= 320
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !address
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';'))
}

#[utoipa::path(get, path = "/orgs/{org_id}/settings", tag = "orgs", security(("bearer" = [])),
    params(("org_id" = Uuid, Path)),
    responses((status = 200, body = SettingsView),
        Unauthorized,
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
        Unauthorized, NotAdmin,
        (status = 422, description = "Not a known time zone, an implausible address, an SLA or a retention window out of bounds", body = ErrorBody)))]
async fn update_settings(
    State(state): State<AppState>,
    caller: Caller,
    RequestId(request_id): RequestId,
    Path(org_id): Path<Uuid>,
    Json(body): Json<SettingsUpdate>,
) -> ApiResult<Json<SettingsView>> {
    caller.require_admin(org_id)?;
    let zone = match &body.time_zone {
        Some(name) => Some(
            name.parse::<chrono_tz::Tz>()
                .map_err(|_| ApiError::validation("time_zone must be an IANA time zone name"))?,
        ),
        None => None,
    };
    let email = body
        .account_manager_email
        .as_ref()
        .map(|e| e.as_deref().map(str::trim));
    if let Some(Some(address)) = email
        && !plausible_email(address)
    {
        return Err(ApiError::validation(
            "account_manager_email must be one email address, or null",
        ));
    }
    if let Some(m) = body.sla_minutes
        && !(1..=MAX_SLA_MINUTES).contains(&m)
    {
        return Err(ApiError::validation(
            "sla_minutes must be between 1 and 10080 (a week)",
        ));
    }
    if let Some(Some(days)) = body.retention_days
        && !(1..=MAX_RETENTION_DAYS).contains(&days)
    {
        return Err(ApiError::validation(
            "retention_days must be between 1 and 3650, or null to keep everything",
        ));
    }
    let change = orgs::SettingsChange {
        time_zone: zone.map(|z| z.name()),
        account_manager_email: email,
        sla_minutes: body.sla_minutes,
        retention_days: body.retention_days,
    };
    let actor = caller.actor(org_id, request_id.as_deref());
    let org = flow::update_settings(&state.flows, actor, org_id, &change).await?;
    Ok(Json(org.into()))
}

impl From<SettingsError> for ApiError {
    fn from(e: SettingsError) -> Self {
        match e {
            SettingsError::NotFound => ApiError::not_found("org"),
            SettingsError::Store(e) => e.into(),
        }
    }
}
