//! Fake Slack, Twilio, Telegram and Resend APIs: they answer the way the real ones do on
//! success (or with an injected fault) and record every call, so a demo shows the replies
//! and a test counts them. Point `SLACK_API_BASE` at `/slack/api`, `TWILIO_API_BASE` at
//! `/` + [`switchboard_channels::whatsapp::PROVIDER`], `TELEGRAM_API_BASE` at `/telegram` and
//! `RESEND_API_BASE` at `/resend`.

use super::Demo;
use super::record::Call;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

fn record(
    demo: &Demo,
    kind: &str,
    uri: &Uri,
    body: Value,
    to: Option<String>,
    text: Option<String>,
) -> Option<u16> {
    let fault = demo.rec.take_fault(kind);
    demo.rec.push(Call {
        seq: 0,
        at: chrono::Utc::now(),
        kind: kind.into(),
        path: uri.path().into(),
        to,
        text,
        idempotency_key: None,
        replayed: false,
        status: fault.unwrap_or(200),
        body,
        alert: None,
    });
    fault
}

fn failure(status: u16, body: Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    (code, Json(body)).into_response()
}

fn field(body: &Value, name: &str) -> Option<String> {
    match &body[name] {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Slack `chat.postMessage`.
pub(super) async fn slack(State(demo): State<Demo>, uri: Uri, Json(body): Json<Value>) -> Response {
    let channel = field(&body, "channel");
    if let Some(status) = record(
        &demo,
        "slack",
        &uri,
        body.clone(),
        channel.clone(),
        field(&body, "text"),
    ) {
        // Slack refuses inside a 200 (`ok: false`); a 5xx is its outage answer.
        return if status >= 500 {
            failure(status, json!({"ok": false, "error": "service_unavailable"}))
        } else {
            Json(json!({"ok": false, "error": "channel_not_found"})).into_response()
        };
    }
    let now = chrono::Utc::now();
    let ts = format!("{}.{:06}", now.timestamp(), now.timestamp_subsec_micros());
    Json(json!({"ok": true, "channel": channel, "ts": ts})).into_response()
}

/// Twilio's Messages API (a form post), which carries WhatsApp.
pub(super) async fn whatsapp(
    State(demo): State<Demo>,
    uri: Uri,
    Path(_account): Path<String>,
    body: Bytes,
) -> Response {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let form: Map<String, Value> = form
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let form = Value::Object(form);
    if let Some(status) = record(
        &demo,
        "whatsapp",
        &uri,
        form.clone(),
        field(&form, "To"),
        field(&form, "Body"),
    ) {
        return failure(
            status,
            json!({"code": 20500, "message": "demo fault", "status": status}),
        );
    }
    let sid = format!("SM{}", uuid::Uuid::new_v4().simple());
    (
        StatusCode::CREATED,
        Json(json!({"sid": sid, "status": "queued"})),
    )
        .into_response()
}

/// Telegram `sendMessage`.
pub(super) async fn telegram(
    State(demo): State<Demo>,
    uri: Uri,
    Path(_bot): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    if let Some(status) = record(
        &demo,
        "telegram",
        &uri,
        body.clone(),
        field(&body, "chat_id"),
        field(&body, "text"),
    ) {
        return failure(
            status,
            json!({"ok": false, "error_code": status, "description": "demo fault"}),
        );
    }
    let message_id = chrono::Utc::now().timestamp_micros() % 1_000_000_000;
    Json(json!({"ok": true, "result": {"message_id": message_id}})).into_response()
}

/// Resend `POST /emails`, deduplicating on `Idempotency-Key` like Resend does.
pub(super) async fn resend_send(
    State(demo): State<Demo>,
    uri: Uri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let to = match &body["to"] {
        Value::Array(list) => list.first().and_then(Value::as_str).map(str::to_owned),
        other => other.as_str().map(str::to_owned),
    };
    let fault = demo.rec.take_fault("email");
    let (id, replayed) = match fault {
        Some(_) => (String::new(), false),
        None => demo
            .rec
            .resend_key(key.as_deref(), uuid::Uuid::new_v4().to_string()),
    };
    demo.rec.push(Call {
        seq: 0,
        at: chrono::Utc::now(),
        kind: "email".into(),
        path: uri.path().into(),
        to,
        text: field(&body, "text"),
        idempotency_key: key,
        replayed,
        status: fault.unwrap_or(200),
        body,
        alert: None,
    });
    if let Some(status) = fault {
        return failure(
            status,
            json!({"name": "application_error", "message": "demo fault"}),
        );
    }
    Json(json!({"id": id})).into_response()
}

/// Resend's Received emails API: the body of an email the simulator sent.
pub(super) async fn resend_received(
    State(demo): State<Demo>,
    uri: Uri,
    Path(email_id): Path<String>,
) -> Response {
    let text = demo.rec.email(&email_id);
    demo.rec.push(Call {
        seq: 0,
        at: chrono::Utc::now(),
        kind: "email-fetch".into(),
        path: uri.path().into(),
        to: None,
        text: text.clone(),
        idempotency_key: None,
        replayed: false,
        status: if text.is_some() { 200 } else { 404 },
        body: Value::Null,
        alert: None,
    });
    match text {
        Some(text) => Json(json!({"object": "email", "id": email_id, "text": text, "html": null}))
            .into_response(),
        None => failure(
            404,
            json!({"name": "not_found", "message": "Email not found"}),
        ),
    }
}
