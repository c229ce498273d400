//! `GET /alerts` for admins: open incidents and those resolved in the last week, with
//! where each was delivered. An admin sees the deployment-wide incidents (Redis, the agent,
//! the queues) and those of the orgs they administer; experts get 403.

use crate::auth::Caller;
use crate::error::responses::Unauthorized;
use crate::error::{ApiResult, ErrorBody};
use crate::extract::{Json, Query};
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_domain::alerts::{AlertKind, Severity};
use switchboard_store::alert_incidents::{self, Incident};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// How far back resolved incidents are listed.
const RECENT: Duration = Duration::from_secs(7 * 86_400);

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// One incident.
#[derive(Debug, Serialize, ToSchema)]
struct AlertView {
    id: Uuid,
    kind: AlertKind,
    severity: Severity,
    /// Which instance of the kind (`agent`, a job name, an org or dead letter id, a pod).
    scope: String,
    /// The org it concerns; `null` for the deployment-wide ones.
    org_id: Option<Uuid>,
    /// `open` or `resolved`.
    status: String,
    summary: String,
    /// What the kind means and when it resolves.
    meaning: &'static str,
    /// Where its runbook is.
    runbook: String,
    /// Figures behind it.
    #[schema(value_type = Object)]
    details: Value,
    opened_at: DateTime<Utc>,
    /// When a pod last saw the condition.
    last_seen_at: DateTime<Utc>,
    resolved_at: Option<DateTime<Utc>>,
    /// Where it went: `[{sink, action, status, attempts, last_error}]`.
    #[schema(value_type = Vec<Object>)]
    deliveries: Value,
}

impl From<Incident> for AlertView {
    fn from(i: Incident) -> Self {
        AlertView {
            id: i.id,
            kind: i.kind,
            severity: i.severity,
            scope: i.scope,
            org_id: i.org_id,
            status: i.status,
            summary: i.summary,
            meaning: i.kind.meaning(),
            runbook: i.kind.runbook(),
            details: i.details,
            opened_at: i.opened_at,
            last_seen_at: i.last_seen_at,
            resolved_at: i.resolved_at,
            deliveries: i.deliveries,
        }
    }
}

/// Which incidents.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum StatusFilter {
    /// Open ones and those resolved in the last 7 days.
    #[default]
    All,
    /// Open ones only.
    Open,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// `all` (default: open, and resolved in the last 7 days) or `open`.
    #[serde(default)]
    #[param(inline)]
    status: StatusFilter,
    /// At most this many, newest first (1–200, default 100).
    limit: Option<u16>,
}

/// The incidents, newest first.
#[derive(Debug, Serialize, ToSchema)]
struct AlertList {
    alerts: Vec<AlertView>,
}

#[utoipa::path(get, path = "/alerts", tag = "operations", security(("bearer" = [])),
    params(ListQuery),
    responses((status = 200, body = AlertList),
        Unauthorized,
        (status = 403, description = "Not an admin of any org", body = ErrorBody),
        (status = 422, description = "A malformed query", body = ErrorBody)))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<AlertList>> {
    let orgs = caller.scope(None, Role::Admin)?;
    let limit = i64::from(query.limit.unwrap_or(100).clamp(1, 200));
    let open_only = matches!(query.status, StatusFilter::Open);
    let incidents = alert_incidents::list(&state.db, &orgs, open_only, RECENT, limit).await?;
    Ok(Json(AlertList {
        alerts: incidents.into_iter().map(AlertView::from).collect(),
    }))
}
