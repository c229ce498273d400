//! Every router of the HTTP surface is merged here, under one middleware stack.

mod alerts;
mod audit;
mod auth;
mod autopilot;
mod connection_secrets;
mod connections;
mod conversations;
mod customers;
mod dead_letters;
mod events;
mod expert_queue;
mod export;
pub(crate) mod health;
mod inbound_events;
mod invitations;
mod journey;
mod members;
mod notes;
mod openapi;
mod pagination;
mod passwords;
mod report_metrics;
mod reports;
mod saved_replies;
mod socket_head;
mod webhooks;

use crate::error::ApiError;
use crate::metrics;
use crate::state::AppState;
use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath};
use axum::http::{HeaderName, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use std::any::Any;
use switchboard_domain::trace;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::{DefaultOnResponse, OnResponse, TraceLayer};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Every route, each documented where it is registered (see `openapi`).
pub(crate) fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(health::router())
        .merge(alerts::router())
        .merge(autopilot::router())
        .merge(auth::router())
        .merge(connections::router())
        .merge(conversations::router())
        .merge(journey::router())
        .merge(customers::router())
        .merge(export::router())
        .merge(audit::router())
        .merge(expert_queue::router())
        .merge(events::router())
        .merge(webhooks::router())
        .merge(dead_letters::router())
        .merge(inbound_events::router())
        .merge(members::router())
        .merge(invitations::router())
        .merge(passwords::router())
        .merge(reports::router())
        .merge(report_metrics::router())
        .merge(saved_replies::router())
        .merge(notes::router())
        .merge(openapi::router())
        .routes(routes!(metrics_text))
}

#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
async fn metrics_text(axum::extract::State(state): axum::extract::State<AppState>) -> Response {
    // With `METRICS_ADDR` set, `/metrics` is served there only, off the public port.
    if state.config.telemetry.metrics_addr.is_some() {
        return not_found().await.into_response();
    }
    metrics::render().await.into_response()
}

/// The whole HTTP application for one pod.
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.http.body_limit_bytes;
    let sentry = state.config.telemetry.sentry_dsn.is_some();
    let traced = state.config.trace_export().is_some();
    // Socket.IO answers `/socket.io/*` before routing; it sits outside the per-route
    // metrics (sockets have their own) but inside tracing, request ids and panic capture.
    let sockets = state.realtime.layer();
    let (routes, _) = api().split_for_parts();
    routes
        .fallback(crate::console::fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            crate::timeouts::Limits::new(&state.config),
            crate::timeouts::limit,
        ))
        .layer(axum::middleware::from_fn(metrics::track))
        .layer(sockets)
        .layer(axum::middleware::from_fn(
            socket_head::own_socket_request_head,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::protection::protect,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(
            ServiceBuilder::new()
                .layer(SetSensitiveRequestHeadersLayer::new([
                    axum::http::header::AUTHORIZATION,
                    axum::http::header::COOKIE,
                ]))
                .layer(axum::middleware::map_request(keep_valid_request_id))
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(move |req: &Request<_>| request_span(req, traced))
                        .on_response(record_response),
                )
                .layer(PropagateRequestIdLayer::new(REQUEST_ID))
                // Sentry's per-request hub and request context (a copy of every header) only
                // when Sentry is on: without a DSN nothing would ever read them.
                .option_layer(sentry.then(|| {
                    ServiceBuilder::new()
                        .layer(
                            sentry_tower::NewSentryLayer::<Request<axum::body::Body>>::new_from_top(
                            ),
                        )
                        .layer(sentry_tower::SentryHttpLayer::new())
                }))
                .layer(CatchPanicLayer::custom(panic_response)),
        )
        .with_state(state)
}

/// The request's span. An API route's (one with a route template, other than the probes
/// and `/metrics`) is exported when tracing is on: named `{method} {route}` as OpenTelemetry
/// names server spans, and continuing the caller's trace when it sends a valid W3C
/// `traceparent`. The probes, `/metrics`, Socket.IO and the console's files get a span
/// for the logs only (target `untraced`), so a scrape or a long-lived socket is no trace.
fn request_span<B>(req: &Request<B>, traced: bool) -> tracing::Span {
    let id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str)
        .filter(|r| !matches!(*r, "/health" | "/ready" | "/metrics"));
    let Some(route) = route.filter(|_| traced) else {
        return tracing::info_span!(target: "untraced", "http", method = %req.method(), uri = %req.uri().path(), request_id = %id);
    };
    let span = tracing::info_span!(
        "http",
        method = %req.method(),
        uri = %req.uri().path(),
        request_id = %id,
        otel.name = %format_args!("{} {route}", req.method()),
        otel.kind = "server",
        http.route = route,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let caller = req
        .headers()
        .get(trace::HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(trace::TraceParent::parse);
    trace::continue_in(&span, caller.as_ref());
    span
}

/// The answer's status on the request's span (a 5xx is an error there), then the default
/// (a `DEBUG` line).
fn record_response<B>(
    res: &axum::http::Response<B>,
    latency: std::time::Duration,
    span: &tracing::Span,
) {
    let status = res.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    DefaultOnResponse::new().on_response(res, latency, span);
}

/// A client's `X-Request-Id` is kept only when it is one value of 1 to 64 characters of
/// `[A-Za-z0-9._-]`: it is echoed in the response, logged and stored in audit rows, so the
/// client must not choose its size or content. Anything else is dropped here and the next
/// layer generates a fresh id.
async fn keep_valid_request_id(
    mut request: Request<axum::body::Body>,
) -> Request<axum::body::Body> {
    let headers = request.headers();
    let mut values = headers.get_all(REQUEST_ID).iter();
    let keep = match (values.next(), values.next()) {
        (None, _) => true,
        (Some(value), None) => valid_request_id(value.as_bytes()),
        (Some(_), Some(_)) => false,
    };
    if !keep {
        request.headers_mut().remove(REQUEST_ID);
    }
    request
}

/// 1 to 64 characters of `[A-Za-z0-9._-]`.
pub(crate) fn valid_request_id(id: &[u8]) -> bool {
    (1..=64).contains(&id.len())
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed for this route",
    )
}

fn panic_response(_: Box<dyn Any + Send + 'static>) -> Response {
    tracing::error!("request handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal server error",
    )
    .into_response()
}
