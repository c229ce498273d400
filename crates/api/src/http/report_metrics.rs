//! `GET /reports/metrics`: the numbers the console's reports page draws, for an org's admins
//! (it names each expert's releases, which is a manager's view). The days are cut in the
//! org's time zone; a range is at most [`MAX_DAYS`] days so that one request stays cheap
//! (the statements and their indexes are in `switchboard_store::report_metrics`).

use crate::auth::Caller;
use crate::error::responses::{NotAdmin, Unauthorized};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Query};
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use switchboard_store::orgs;
use switchboard_store::report_metrics::{self, Range};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// The longest range one request covers, in days (a quarter).
pub const MAX_DAYS: u64 = 92;

/// The days shown when none are asked for: the last week, today included.
const DEFAULT_DAYS: u64 = 7;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MetricsQuery {
    /// An org the caller administers.
    org_id: Uuid,
    /// First day (`YYYY-MM-DD`, in the org's time zone); six days before `to` when absent.
    from: Option<NaiveDate>,
    /// Last day, included; today in the org's time zone when absent.
    to: Option<NaiveDate>,
}

/// Messages of one channel on one day.
#[derive(Serialize, ToSchema)]
struct ChannelDay {
    day: NaiveDate,
    channel: String,
    inbound: i64,
    outbound: i64,
}

/// Time from each customer message of a day to the first reply after it.
#[derive(Serialize, ToSchema)]
struct FirstReplyDay {
    day: NaiveDate,
    customer_messages: i64,
    /// Customer messages a reply has followed (the percentiles are over these).
    answered: i64,
    p50_secs: Option<f64>,
    p90_secs: Option<f64>,
}

/// Replies released on one day.
#[derive(Serialize, ToSchema)]
struct ReleaseDay {
    day: NaiveDate,
    releases: i64,
    /// Sent as the draft, unchanged.
    draft: i64,
    /// The draft, edited.
    edited: i64,
    /// The expert's own text.
    own: i64,
    /// Released at or before the item's `sla_due_at`.
    sla_met: i64,
    /// Releases of items with a deadline (the SLA share's denominator).
    sla_known: i64,
}

/// One expert's releases over the range.
#[derive(Serialize, ToSchema)]
struct ExpertReleases {
    user_id: Option<Uuid>,
    email: Option<String>,
    display_name: Option<String>,
    releases: i64,
}

/// An org's metrics over a range of days; days without activity are left out of each list.
#[derive(Serialize, ToSchema)]
struct MetricsView {
    org_id: Uuid,
    from: NaiveDate,
    to: NaiveDate,
    /// The zone the days are cut in.
    time_zone: String,
    /// The org's SLA now (past items keep the deadline they had).
    sla_minutes: i32,
    messages: Vec<ChannelDay>,
    first_reply: Vec<FirstReplyDay>,
    releases: Vec<ReleaseDay>,
    /// Most releases first (the autopilot's sends are not an expert's).
    experts: Vec<ExpertReleases>,
    /// How experts handled the agent's drafts, per channel and confidence tenth: where the
    /// autopilot's line is safe.
    calibration: Vec<switchboard_domain::autopilot::Bucket>,
    /// For each channel of the org's autopilot policy, what its threshold would have done
    /// with the same drafts.
    autopilot: Vec<switchboard_domain::autopilot::AtThreshold>,
}

/// The instant a day starts in `zone` (the first one, on a day that starts twice).
fn midnight(zone: chrono_tz::Tz, day: NaiveDate) -> Option<DateTime<Utc>> {
    // A zone that skips midnight (a DST change at 00:00) starts the day at the first hour.
    (0..3).find_map(|h| {
        zone.from_local_datetime(&day.and_hms_opt(h, 0, 0)?)
            .earliest()
            .map(|t| t.with_timezone(&Utc))
    })
}

#[utoipa::path(get, path = "/reports/metrics", tag = "reports", security(("bearer" = [])),
    params(MetricsQuery),
    description = "An org's activity per day: messages per channel, time to first reply, \
        SLA met, what replies were made of, releases per expert, and the autopilot's \
        calibration (how experts handled drafts per confidence tenth, and what the org's \
        thresholds would have sent)",
    responses((status = 200, body = MetricsView),
        Unauthorized, NotAdmin,
        (status = 422, description = "A malformed date, `from` after `to`, or more than 92 days", body = ErrorBody)))]
async fn metrics(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<MetricsQuery>,
) -> ApiResult<Json<MetricsView>> {
    caller.require_admin(q.org_id)?;
    let org = orgs::settings(&state.db, q.org_id)
        .await?
        .ok_or_else(|| ApiError::not_found("org"))?;
    let zone: chrono_tz::Tz = org.time_zone.parse().unwrap_or(chrono_tz::UTC);
    let to =
        q.to.unwrap_or_else(|| Utc::now().with_timezone(&zone).date_naive());
    let from = match q.from {
        Some(from) => from,
        None => to
            .checked_sub_days(Days::new(DEFAULT_DAYS - 1))
            .ok_or_else(|| ApiError::validation("to is out of range"))?,
    };
    if from > to {
        return Err(ApiError::validation("from must not be after to"));
    }
    if (to - from).num_days() >= MAX_DAYS as i64 {
        return Err(ApiError::validation(format!(
            "a range covers at most {MAX_DAYS} days"
        )));
    }
    let bounds = to
        .checked_add_days(Days::new(1))
        .and_then(|after| Some((midnight(zone, from)?, midnight(zone, after)?)));
    let Some((start, end)) = bounds else {
        return Err(ApiError::validation("from and to must be real days"));
    };
    let range = Range {
        org_id: q.org_id,
        start,
        end,
        time_zone: zone.name(),
    };
    let (m, handled, policy) = futures::try_join!(
        report_metrics::metrics(&state.db, range),
        report_metrics::handled_drafts(&state.db, range),
        orgs::autopilot(&state.db, q.org_id, orgs::Lock::Unlocked),
    )?;
    let policy = policy.unwrap_or_default();
    Ok(Json(MetricsView {
        org_id: q.org_id,
        from,
        to,
        time_zone: zone.name().to_owned(),
        sla_minutes: org.sla_minutes,
        messages: m
            .messages
            .into_iter()
            .map(|r| ChannelDay {
                day: r.day,
                channel: r.channel,
                inbound: r.inbound,
                outbound: r.outbound,
            })
            .collect(),
        first_reply: m
            .first_reply
            .into_iter()
            .map(|r| FirstReplyDay {
                day: r.day,
                customer_messages: r.customer_messages,
                answered: r.answered,
                p50_secs: r.p50_secs,
                p90_secs: r.p90_secs,
            })
            .collect(),
        releases: m
            .releases
            .into_iter()
            .map(|r| ReleaseDay {
                day: r.day,
                releases: r.releases,
                draft: r.draft,
                edited: r.edited,
                own: r.own,
                sla_met: r.sla_met,
                sla_known: r.sla_known,
            })
            .collect(),
        experts: m
            .experts
            .into_iter()
            .map(|r| ExpertReleases {
                user_id: r.user_id,
                email: r.email,
                display_name: r.display_name,
                releases: r.releases,
            })
            .collect(),
        calibration: switchboard_domain::autopilot::calibrate(&handled),
        autopilot: switchboard_domain::autopilot::at_thresholds(&policy, &handled),
    }))
}
