//! `POST /webhooks/{channel}/{connection_id}` (F1): verify, dedup, commit, enqueue, answer.
//!
//! The connection is read through the pod's [`crate::connection_cache`], which every pod
//! invalidates through Redis when a connection changes.
//!
//! A 2xx means the event is committed in `inbound_events`. Redis `SET NX` is only the fast
//! duplicate filter; the unique index is the truth. If Redis is down the event is still
//! committed and acknowledged, and the inbox sweeper enqueues it later.

use crate::error::ErrorBody;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use switchboard_channels::{
    InboundError, InboundRequest, InboundSecrets, PreviousSecret, SignedWith, Verified,
    inbound_secret_field, verify_and_parse_rotating,
};
use switchboard_domain::ChannelKind;
use switchboard_domain::jobs::{InboxMessage, InboxPayload};
use switchboard_domain::trace;
use switchboard_flows::intake::IntakeError;
use switchboard_store::inbox::NewEvent;
use tracing::Instrument;
use tracing::field::Empty;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(receive))
}

/// Bodies up to this size are verified and parsed on the request's own task.
const INLINE_PARSE_MAX_BYTES: usize = 16 * 1024;

fn unknown_connection() -> ApiError {
    ApiError::not_found("channel connection")
}

#[utoipa::path(post, path = "/webhooks/{channel}/{connection_id}", tag = "webhooks",
    params(("channel" = ChannelKind, Path), ("connection_id" = Uuid, Path)),
    request_body(content = String, description = "The provider's request, signed the way the provider signs it (SPEC §3 F1)"),
    responses((status = 200, description = "Committed to the inbox (`accepted`) or already there (`duplicate`); Slack's url_verification gets its challenge"),
        (status = 400, body = ErrorBody), (status = 401, description = "Bad or stale signature", body = ErrorBody),
        (status = 404, description = "Unknown connection", body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 503, description = "Not stored; retry", body = ErrorBody)))]
async fn receive(
    State(state): State<AppState>,
    Path((channel, connection_id)): Path<(String, String)>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    // The journey's `received`: the pod's clock as the request reached the handler.
    let arrived_at = chrono::Utc::now();
    // The event's trace starts here (or continues the request's): its context is stored
    // with the inbox row and travels with the job.
    let span = tracing::info_span!(
        "webhook",
        channel = Empty,
        connection_id = Empty,
        org_id = Empty,
        event_id = Empty,
        outcome = Empty,
    );
    let request = Received {
        channel,
        connection_id,
        uri,
        headers,
        arrived_at,
    };
    let answer = accept(state, request, body).instrument(span.clone()).await;
    if answer.is_err() {
        span.record("outcome", "refused");
    }
    answer
}

/// A webhook request as it arrived, besides its body.
struct Received {
    channel: String,
    connection_id: String,
    uri: axum::http::Uri,
    headers: HeaderMap,
    arrived_at: chrono::DateTime<chrono::Utc>,
}

/// The webhook, in its span.
async fn accept(
    state: AppState,
    request: Received,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let Received {
        channel,
        connection_id,
        uri,
        headers,
        arrived_at,
    } = request;
    let body_len = body.as_ref().map_or(0, Bytes::len);
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::payload_too_large()
        } else {
            ApiError::bad_request("malformed_payload", r.body_text())
        }
    })?;
    let channel: ChannelKind = channel.parse().map_err(|()| unknown_connection())?;
    let connection_id: Uuid = connection_id.parse().map_err(|_| unknown_connection())?;
    let loaded = state
        .connections
        .get(&state.db, &state.cipher, connection_id)
        .await?
        .filter(|l| l.connection.channel == channel)
        .ok_or_else(unknown_connection)?;
    let connection = &loaded.connection;
    let span = tracing::Span::current();
    span.record("channel", channel.as_str());
    span.record("connection_id", tracing::field::display(connection_id));
    span.record("org_id", tracing::field::display(connection.org_id));

    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let base = state.config.http.public_base_url.as_str();
    let public_url = format!("{}{path}", base.trim_end_matches('/'));
    let now_unix = chrono::Utc::now().timestamp();
    let verify = {
        let loaded = loaded.clone();
        move || {
            let request = InboundRequest {
                headers: &headers,
                body: &body,
                public_url: &public_url,
                now_unix,
            };
            // During a rotation the replaced value verifies too, until its expiry (checked
            // against this request's time, so an expired one never does).
            let previous = loaded
                .secrets
                .previous(inbound_secret_field(channel))
                .map(|p| PreviousSecret {
                    value: p.expose(),
                    expires_unix: p.expires_at().timestamp(),
                });
            let secrets = InboundSecrets {
                current: loaded.secrets.expose(),
                previous,
            };
            verify_and_parse_rotating(channel, secrets, &request)
        }
    };
    // A large body costs real CPU to authenticate and parse (an email's HTML becomes text
    // here): that runs on the blocking pool, so it never stalls the async threads that
    // answer every other request. Small ones are cheaper inline than the hand-off.
    let verified = if body_len > INLINE_PARSE_MAX_BYTES {
        tokio::task::spawn_blocking(verify)
            .await
            .map_err(ApiError::internal)?
    } else {
        verify()
    };
    if let Ok((_, SignedWith::Previous)) = &verified {
        // Still rising: the provider has not switched to the new secret yet.
        metrics::counter!("webhooks_verified_with_previous_secret_total", "channel" => channel.as_str())
            .increment(1);
    }
    let event = match verified.map(|(verified, _)| verified) {
        Ok(Verified::Challenge(challenge)) => {
            span.record("outcome", "challenge");
            return Ok(([(header::CONTENT_TYPE, "text/plain")], challenge).into_response());
        }
        Ok(Verified::Event(event)) => event,
        Err(e) => {
            metrics::counter!("webhooks_rejected_total", "channel" => channel.as_str())
                .increment(1);
            return Err(rejection(e));
        }
    };
    // Counted from here, once the signature holds: the pod's workers give way while many
    // genuine webhooks are being committed, and forged or unknown requests never make them.
    let _in_flight = state.flows.load.enter();
    // Once accepting has outrun processing, the webhook waits for its share (`pressure`).
    state.flows.load.pace().await;

    let scope = switchboard_coord::dedup::scope(channel.as_str(), connection_id, &event.dedup_key);
    let has_message = event.message.is_some();
    let payload = InboxPayload {
        message: event.message.map(|m| InboxMessage {
            customer_external_id: m.customer_external_id,
            customer_name: m.customer_name,
            text: switchboard_channels::cap_text(m.text, state.config.inbox.text_max_bytes),
            // A provider's message ids are unique per bot or number at best (two Telegram
            // bots of one org both see `{chat_id}:{message_id}` = `1:1`): the connection
            // is part of the message's identity.
            channel_message_id: format!("{connection_id}:{}", m.channel_message_id),
            reply_to: m.reply_to,
        }),
        raw: event.payload,
    };
    let payload = serde_json::to_value(payload).map_err(ApiError::internal)?;
    let submitted = state
        .intake
        .submit(
            NewEvent {
                org_id: connection.org_id,
                connection_id,
                channel,
                dedup_key: event.dedup_key,
                payload,
                processed: !has_message,
                traceparent: trace::of(&span),
                arrived_at,
            },
            scope,
        )
        .await;
    let event_id = match submitted {
        Ok(Some(id)) => id,
        Ok(None) => {
            span.record("outcome", "duplicate");
            return Ok(duplicate(channel));
        }
        Err(IntakeError::Refused(e)) => {
            tracing::error!(error = %e, "inbound event refused by the inbox");
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unstorable_event",
                "the event holds data that cannot be stored",
            ));
        }
        Err(e) => {
            // Postgres away, restarting or refusing the batch: nothing was stored, and a
            // 503 (never a 500) makes the provider retry.
            tracing::error!(error = %e, "could not commit inbound event");
            return Err(ApiError::dependency_unavailable(
                "the event could not be stored; retry later",
            ));
        }
    };
    span.record("outcome", "accepted");
    span.record("event_id", tracing::field::display(event_id));
    metrics::counter!("webhooks_accepted_total", "channel" => channel.as_str()).increment(1);
    Ok((
        StatusCode::OK,
        axum::Json(json!({"status": "accepted", "event_id": event_id})),
    )
        .into_response())
}

fn duplicate(channel: ChannelKind) -> Response {
    metrics::counter!("webhook_dedup_hits_total", "channel" => channel.as_str()).increment(1);
    (StatusCode::OK, axum::Json(json!({"status": "duplicate"}))).into_response()
}

fn rejection(error: InboundError) -> ApiError {
    match error {
        InboundError::MissingSignature => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
            "missing signature",
        ),
        InboundError::BadSignature => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
            "signature does not match",
        ),
        InboundError::StaleTimestamp => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "stale_timestamp",
            "timestamp is outside the replay window",
        ),
        InboundError::Malformed(m) => ApiError::bad_request("malformed_payload", m),
        other => ApiError::internal(other),
    }
}
