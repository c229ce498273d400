//! A message's journey for the console: `GET /conversations/{id}/messages/{message_id}/journey`
//! lists, from the database alone, the steps of the exchange the message is part of (the
//! customer's message and the replies answering it), each with its time, pod, detail and
//! trace id (docs/OPERATIONS.md, "Reading a journey"). Any member of the message's org may
//! read it; a message that is missing, of another conversation or of another org is one
//! answer, 404, so its existence never leaks.

use crate::auth::Caller;
use crate::error::responses::Unauthorized;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path};
use crate::state::AppState;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use switchboard_domain::{JourneyStep, Role};
use switchboard_flows::journey::{self, JourneyEntry, JourneyError};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(message_journey))
}

/// One step of the exchange.
#[derive(Debug, Serialize, ToSchema)]
struct StepView {
    step: JourneyStep,
    /// When: the receiving pod's clock for `received`, Postgres' for every other step.
    at: DateTime<Utc>,
    /// Milliseconds since the exchange's first step.
    since_start_ms: i64,
    /// The pod that wrote the step (`POD_ID`).
    pod: String,
    /// The message the step is about: the customer's (received to claimed) or the reply
    /// (released to delivered).
    message_id: Uuid,
    /// Whether `message_id` is the message asked about.
    this_message: bool,
    /// By step: `queued` {attempt}; `drafted` {draft_id, agent_ms, confidence, fallback};
    /// `shown` {queue_item_id, status, version, flagged_for_review, autopilot_rule};
    /// `claimed` {queue_item_id, user_id, name, assigned_by}; `released` {by: user |
    /// autopilot, user_id, name, rule, reply: draft | edited | own, unchanged, answers};
    /// `attempt` {attempt, outcome: accepted | retry | refused, status, error_class};
    /// `delivered` {parts}; `dead_lettered` {dead, attempts}. Never customer text.
    #[schema(value_type = Object)]
    detail: Value,
    /// The W3C trace id of the span that wrote it, while tracing was on.
    trace_id: Option<String>,
}

impl From<JourneyEntry> for StepView {
    fn from(e: JourneyEntry) -> Self {
        StepView {
            step: e.step,
            at: e.at,
            since_start_ms: e.since_start_ms,
            pod: e.pod,
            message_id: e.message_id,
            this_message: e.this_message,
            detail: e.detail,
            trace_id: e.trace_id,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MessageJourney)]
struct JourneyView {
    conversation_id: Uuid,
    message_id: Uuid,
    /// Oldest first.
    steps: Vec<StepView>,
}

impl From<JourneyError> for ApiError {
    fn from(e: JourneyError) -> Self {
        match e {
            JourneyError::NotFound => ApiError::not_found("message"),
            JourneyError::Store(e) => e.into(),
        }
    }
}

#[utoipa::path(get, path = "/conversations/{id}/messages/{message_id}/journey", tag = "conversations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path), ("message_id" = Uuid, Path)),
    responses((status = 200, body = JourneyView),
        Unauthorized,
        (status = 404, description = "No such message in this conversation of the caller's orgs", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn message_journey(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, message_id)): Path<(Uuid, Uuid)>,
) -> ApiResult<Json<JourneyView>> {
    // Every org the caller is a member of; none is a 404 like any other message.
    let orgs = caller.scope(None, Role::Expert).unwrap_or_default();
    let steps = journey::of_message(&state.db, &orgs, id, message_id).await?;
    Ok(Json(JourneyView {
        conversation_id: id,
        message_id,
        steps: steps.into_iter().map(StepView::from).collect(),
    }))
}
