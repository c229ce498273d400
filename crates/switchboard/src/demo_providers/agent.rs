//! A stand-in for the AI agent (`POST {AGENT_URL}/v1/chat`, Switchboard's contract): the
//! draft depends on what the customer last wrote, so a demo shows drafts worth editing.
//! `#fail` in a message makes it answer 503 (the pods then store a flagged fallback draft),
//! `#slow` makes it take three seconds. `GET {AGENT_URL}` is the pods' health probe
//! (`agent-health`): it answers the `agent` fault while one is set, so
//! `POST /api/faults {"kind": "agent", "status": 503}` takes the agent down as the pods see
//! it (the `agent_failing` alert) and `{"kind": "agent", "status": 0}` brings it back.

use super::Demo;
use super::record::Call;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

#[derive(Deserialize)]
pub(super) struct ChatRequest {
    #[serde(default)]
    messages: Vec<Line>,
    #[serde(default)]
    conversation_id: Option<String>,
}

#[derive(Deserialize)]
struct Line {
    role: String,
    text: String,
}

/// `POST /agent/v1/chat`.
pub(super) async fn chat(State(demo): State<Demo>, Json(req): Json<ChatRequest>) -> Response {
    let last = req
        .messages
        .iter()
        .rev()
        .find(|l| l.role == "customer")
        .map(|l| l.text.as_str())
        .unwrap_or_default();
    let fault = demo.rec.take_fault("agent");
    let status = match fault {
        Some(status) => status,
        None if last.contains("#fail") => 503,
        None => 200,
    };
    demo.rec.push(Call {
        seq: 0,
        at: chrono::Utc::now(),
        kind: "agent".into(),
        path: "/agent/v1/chat".into(),
        to: req.conversation_id.clone(),
        text: Some(last.to_owned()),
        idempotency_key: None,
        replayed: false,
        status,
        body: json!({"messages": req.messages.len()}),
        alert: None,
    });
    if status != 200 {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        return (
            code,
            Json(json!({"error": "the demo agent was told to fail"})),
        )
            .into_response();
    }
    if last.contains("#slow") {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let (reply, confidence) = draft(last);
    let words = last.split_whitespace().count().max(1);
    Json(json!({
        "reply": reply,
        "confidence": confidence,
        "cost_usd": 0.0002 * words as f64,
    }))
    .into_response()
}

/// `GET /agent`: the health probe (not recorded: it runs every few seconds). While an
/// `agent` fault is set, it answers the fault's status.
pub(super) async fn probe(State(demo): State<Demo>) -> Response {
    match demo.rec.fault_status("agent") {
        Some(status) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
            Json(json!({"error": "the demo agent was told to fail"})),
        )
            .into_response(),
        None => Json(json!({"status": "ok"})).into_response(),
    }
}

/// The draft for a customer's message, and how sure the "agent" is of it.
pub(super) fn draft(message: &str) -> (String, f64) {
    let lower = message.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let quoted: String = message.trim().chars().take(80).collect();
    // A complaint first: "my package arrived damaged" is about a return, not a delivery.
    if has(&["refund", "return", "money back", "broken", "damaged"]) {
        (
            "I'm sorry it didn't work out. I've opened a return for you: you'll get a prepaid \
             label by email, and the refund is issued as soon as the parcel is scanned."
                .into(),
            0.71,
        )
    } else if has(&["order", "package", "delivery", "shipping", "track"]) {
        (
            "Thanks for checking in! Your order has left our warehouse and should arrive within \
             two business days. I'll send you the tracking link as soon as the carrier scans it."
                .into(),
            0.86,
        )
    } else if has(&["password", "log in", "login", "sign in", "account"]) {
        (
            "You can reset your password from the sign-in page with \"Forgot password\". If the \
             email doesn't arrive within five minutes, tell me and I'll reset it for you."
                .into(),
            0.8,
        )
    } else if has(&["price", "cost", "plan", "invoice", "bill"]) {
        (
            "Our plans start at 19 EUR a month, billed monthly, and you can change or cancel at \
             any time. Would you like me to send you the full price list?"
                .into(),
            0.64,
        )
    } else if has(&["hello", "hi ", "hey", "good morning"]) || lower.trim() == "hi" {
        ("Hi there! How can I help you today?".into(), 0.93)
    } else {
        (
            format!(
                "Thanks for your message (\u{201c}{quoted}\u{201d}). Someone from our team is \
                 looking into it and will get back to you shortly."
            ),
            0.42,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::draft;

    #[test]
    fn drafts_depend_on_the_message() {
        assert!(draft("Where is my order?").0.contains("order"));
        assert!(draft("I want a refund").0.contains("refund"));
        let (other, confidence) = draft("Can you paint my fence purple");
        assert!(other.contains("paint my fence purple"));
        assert!(confidence < 0.5);
    }
}
