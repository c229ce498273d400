//! Fake alert sinks: a Slack incoming webhook (`POST /alerts/slack`), PagerDuty's Events API
//! v2 (`POST /alerts/pagerduty/v2/enqueue`) and a generic webhook signed the Standard
//! Webhooks way (`POST /alerts/webhook`). Each answers like the real one, records what it
//! was told (kinds `alert-slack`, `alert-pagerduty` and `alert-webhook`, with the trigger
//! or resolve read out of the request) and takes the faults of `POST /api/faults`.
//!
//! Point the pods at them with `ALERT_SLACK_WEBHOOK_URL={url}/alerts/slack`,
//! `ALERT_PAGERDUTY_URL={url}/alerts/pagerduty/v2/enqueue` (any
//! `ALERT_PAGERDUTY_ROUTING_KEY`), `ALERT_WEBHOOK_URL={url}/alerts/webhook` and
//! `ALERT_WEBHOOK_SECRET` = this process's `DEMO_ALERT_WEBHOOK_SECRET` (both default to
//! [`DEFAULT_WEBHOOK_SECRET`]).

use super::Demo;
use super::record::{AlertSeen, Call};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use switchboard_channels::alert_sinks::standard_webhooks_signature;

/// The Standard Webhooks secret the demo stack signs and verifies alert webhooks with
/// (`whsec_` and the base64 of `switchboard demo alert webhooks!`): a demo value, in
/// scripts/dev-up.sh too.
pub const DEFAULT_WEBHOOK_SECRET: &str = "whsec_c3dpdGNoYm9hcmQgZGVtbyBhbGVydCB3ZWJob29rcyE=";

/// How far a webhook's timestamp may be from this process's clock (the Standard Webhooks
/// libraries' tolerance).
const TOLERANCE_SECS: i64 = 300;

/// Records one call to an alert sink; the sink's `fault`, if one was set, is its status.
fn record(demo: &Demo, kind: &str, uri: &Uri, body: Value, alert: Option<AlertSeen>, status: u16) {
    demo.rec.push(Call {
        seq: 0,
        at: chrono::Utc::now(),
        kind: kind.into(),
        path: uri.path().into(),
        to: None,
        text: alert.as_ref().map(AlertSeen::line),
        idempotency_key: None,
        replayed: false,
        status,
        body,
        alert,
    });
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
}

/// `POST /alerts/slack`: a Slack incoming webhook, which answers `ok` as plain text (and its
/// refusals as plain text too).
pub(super) async fn slack(State(demo): State<Demo>, uri: Uri, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        record(&demo, "alert-slack", &uri, Value::Null, None, 400);
        return (StatusCode::BAD_REQUEST, "invalid_payload").into_response();
    };
    let Some(text) = body["text"].as_str().filter(|t| !t.is_empty()) else {
        record(&demo, "alert-slack", &uri, body, None, 400);
        return (StatusCode::BAD_REQUEST, "no_text").into_response();
    };
    let alert = slack_alert(text);
    let fault = demo.rec.take_fault("alert-slack");
    record(
        &demo,
        "alert-slack",
        &uri,
        body,
        Some(alert),
        fault.unwrap_or(200),
    );
    match fault {
        Some(status) => {
            let answer = match status {
                404 => "no_service",
                410 => "channel_is_archived",
                403 => "action_prohibited",
                s if s >= 500 => "service_unavailable",
                _ => "invalid_payload",
            };
            (status_code(status), answer).into_response()
        }
        None => (StatusCode::OK, "ok").into_response(),
    }
}

/// Reads Switchboard's Slack text: `:emoji: [CRITICAL] kind (scope): summary\nRunbook: …`, or
/// `:emoji: [RESOLVED] kind (scope): summary\n…`.
fn slack_alert(text: &str) -> AlertSeen {
    let first = text.lines().next().unwrap_or_default();
    let headline = first
        .split_once(' ')
        .filter(|(emoji, _)| emoji.starts_with(':'))
        .map_or(first, |(_, rest)| rest);
    let (tag, rest) = match headline.strip_prefix('[').and_then(|h| h.split_once("] ")) {
        Some((tag, rest)) => (Some(tag), rest),
        None => (None, headline),
    };
    let resolved = tag == Some("RESOLVED");
    let mut alert = headline_alert(rest);
    alert.action = if resolved { "resolve" } else { "trigger" }.into();
    if !resolved {
        alert.severity = tag.map(str::to_lowercase);
    }
    alert
}

/// `kind (scope): summary`, as Switchboard's headlines read.
fn headline_alert(headline: &str) -> AlertSeen {
    let parsed = headline.split_once(" (").and_then(|(kind, rest)| {
        let (scope, summary) = rest.split_once("): ")?;
        (!kind.contains(' ')).then_some((kind, scope, summary))
    });
    match parsed {
        Some((kind, scope, summary)) => AlertSeen {
            action: String::new(),
            kind: Some(kind.into()),
            severity: None,
            scope: Some(scope.into()),
            summary: Some(summary.into()),
        },
        None => AlertSeen {
            action: String::new(),
            kind: None,
            severity: None,
            scope: None,
            summary: Some(headline.into()),
        },
    }
}

/// PagerDuty's refusal of an event it cannot read.
fn pagerduty_invalid(error: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({
            "status": "invalid event",
            "message": "Event object is invalid",
            "errors": [error],
        })),
    )
        .into_response()
}

/// What is wrong with an Events API v2 event, as PagerDuty says it.
fn pagerduty_problem(body: &Value) -> Option<&'static str> {
    if !body.is_object() {
        return Some("Event object is not JSON");
    }
    let blank = |v: &Value| v.as_str().is_none_or(str::is_empty);
    if blank(&body["routing_key"]) {
        return Some("'routing_key' is missing or blank");
    }
    match body["event_action"].as_str() {
        Some("trigger") => {
            let payload = &body["payload"];
            if blank(&payload["summary"]) {
                Some("'payload.summary' is missing or blank")
            } else if blank(&payload["source"]) {
                Some("'payload.source' is missing or blank")
            } else if !matches!(
                payload["severity"].as_str(),
                Some("critical" | "error" | "warning" | "info")
            ) {
                Some("'payload.severity' must be critical, error, warning or info")
            } else {
                None
            }
        }
        Some("acknowledge" | "resolve") if !body["dedup_key"].is_string() => {
            Some("'dedup_key' is required to acknowledge or resolve")
        }
        Some("acknowledge" | "resolve") => None,
        Some(_) => Some("'event_action' must be trigger, acknowledge or resolve"),
        None => Some("'event_action' is missing"),
    }
}

/// `POST /alerts/pagerduty/v2/enqueue`: PagerDuty's Events API v2. The routing key is not
/// kept; a resolve is shown with what its trigger said (same `dedup_key`).
pub(super) async fn pagerduty(State(demo): State<Demo>, uri: Uri, body: Bytes) -> Response {
    let mut body = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
    let problem = pagerduty_problem(&body);
    if body["routing_key"].is_string() {
        body["routing_key"] = json!("(not kept)");
    }
    if let Some(problem) = problem {
        record(&demo, "alert-pagerduty", &uri, body, None, 400);
        return pagerduty_invalid(problem);
    }
    let action = body["event_action"].as_str().unwrap_or_default().to_owned();
    let dedup_key = match body["dedup_key"].as_str() {
        Some(key) => key.to_owned(),
        None => uuid::Uuid::new_v4().simple().to_string(),
    };
    let alert = if action == "trigger" {
        let payload = &body["payload"];
        let headline = payload["summary"].as_str().unwrap_or_default();
        // The summary is Switchboard's headline, `[SEVERITY] kind (scope): summary`.
        let rest = headline
            .strip_prefix('[')
            .and_then(|h| h.split_once("] "))
            .map_or(headline, |(_, rest)| rest);
        let mut alert = headline_alert(rest);
        alert.action = action.clone();
        alert.kind = payload["component"]
            .as_str()
            .map(str::to_owned)
            .or(alert.kind);
        alert.scope = payload["group"].as_str().map(str::to_owned).or(alert.scope);
        alert.severity = payload["severity"].as_str().map(str::to_owned);
        alert
    } else {
        match demo.rec.pagerduty_trigger(&dedup_key) {
            Some(trigger) => AlertSeen {
                action: action.clone(),
                ..trigger
            },
            None => AlertSeen {
                action: action.clone(),
                kind: None,
                severity: None,
                scope: None,
                summary: Some(format!("dedup_key {dedup_key}")),
            },
        }
    };
    let fault = demo.rec.take_fault("alert-pagerduty");
    if fault.is_none() && action == "trigger" {
        demo.rec.keep_pagerduty_trigger(&dedup_key, &alert);
    }
    record(
        &demo,
        "alert-pagerduty",
        &uri,
        body,
        Some(alert),
        fault.unwrap_or(202),
    );
    if let Some(status) = fault {
        let answer = if status == 429 {
            json!({"status": "throttle event", "message": "Requests for this service are arriving too quickly."})
        } else {
            json!({"status": "demo fault", "message": "demo fault"})
        };
        return (status_code(status), Json(answer)).into_response();
    }
    (
        StatusCode::ACCEPTED,
        Json(json!({"status": "success", "message": "Event processed", "dedup_key": dedup_key})),
    )
        .into_response()
}

/// Why a Standard Webhooks message does not verify, if it does not.
fn webhook_refusal(secret: &str, headers: &HeaderMap, body: &str) -> Option<&'static str> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(id), Some(timestamp), Some(signatures)) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    ) else {
        return Some("missing webhook-id, webhook-timestamp or webhook-signature");
    };
    let Ok(timestamp) = timestamp.parse::<i64>() else {
        return Some("webhook-timestamp is not a number");
    };
    if (chrono::Utc::now().timestamp() - timestamp).abs() > TOLERANCE_SECS {
        return Some("webhook-timestamp is too far from now");
    }
    let Some(expected) = standard_webhooks_signature(secret, id, timestamp, body) else {
        return Some("the demo's DEMO_ALERT_WEBHOOK_SECRET is not whsec_<base64>");
    };
    // Several signatures may be sent (a key rotation), space separated: one must match.
    if signatures.split(' ').any(|s| s == expected) {
        None
    } else {
        Some("no signature matches (is ALERT_WEBHOOK_SECRET the demo's DEMO_ALERT_WEBHOOK_SECRET?)")
    }
}

/// `POST /alerts/webhook`: a receiver of Standard Webhooks messages, which verifies the
/// signature with the demo's secret (401 when it does not match) and answers 204.
pub(super) async fn webhook(
    State(demo): State<Demo>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let text = String::from_utf8_lossy(&body);
    let json = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
    if let Some(refusal) = webhook_refusal(&demo.alert_secret, &headers, &text) {
        record(&demo, "alert-webhook", &uri, json, None, 401);
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": refusal}))).into_response();
    }
    let data = &json["data"];
    let action = json["type"].as_str().and_then(|t| t.strip_prefix("alert."));
    let Some(action) = action.filter(|_| data.is_object()) else {
        record(&demo, "alert-webhook", &uri, json, None, 400);
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "expected {type: alert.trigger | alert.resolve, data: {...}}"})),
        )
            .into_response();
    };
    let text = |name: &str| data[name].as_str().map(str::to_owned);
    let alert = AlertSeen {
        action: action.to_owned(),
        kind: text("kind"),
        severity: text("severity"),
        scope: text("scope"),
        summary: text("summary"),
    };
    let fault = demo.rec.take_fault("alert-webhook");
    record(
        &demo,
        "alert-webhook",
        &uri,
        json,
        Some(alert),
        fault.unwrap_or(204),
    );
    match fault {
        Some(status) => (status_code(status), Json(json!({"error": "demo fault"}))).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{DEFAULT_WEBHOOK_SECRET, headline_alert, slack_alert};
    use crate::demo_providers::record::Recorder;
    use crate::demo_providers::{Demo, router};
    use serde_json::{Value, json};
    use std::path::PathBuf;
    use std::sync::Arc;
    use switchboard_channels::alert_sinks::{Action, Notice, Sinks, standard_webhooks_signature};

    /// The demo providers on a free port, with a client.
    async fn serve() -> (String, reqwest::Client) {
        switchboard_channels::install_tls_provider();
        let demo = Demo {
            rec: Arc::new(Recorder::default()),
            http: reqwest::Client::new(),
            switchboard: "http://127.0.0.1:9".parse().unwrap(),
            pods: Arc::new(Vec::new()),
            seed: Arc::new(PathBuf::from("/nonexistent/seed.json")),
            alert_secret: Arc::from(DEFAULT_WEBHOOK_SECRET),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router(demo)).await });
        (url, reqwest::Client::new())
    }

    async fn calls(http: &reqwest::Client, url: &str, kind: &str) -> Vec<Value> {
        let page: Value = http
            .get(format!("{url}/api/calls?kind={kind}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        page["calls"].as_array().unwrap().clone()
    }

    fn webhook_body(kind: &str) -> String {
        json!({
            "type": "alert.trigger",
            "timestamp": chrono::Utc::now(),
            "data": {
                "incident_id": uuid::Uuid::new_v4(),
                "kind": kind,
                "severity": "critical",
                "scope": "agent",
                "summary": "6 agent probes failed in a row",
                "details": {},
                "runbook": "docs/OPERATIONS.md#alert-agent-failing",
                "opened_at": chrono::Utc::now(),
                "resolved_at": null,
                "source": "localhost",
            }
        })
        .to_string()
    }

    async fn post_webhook(
        http: &reqwest::Client,
        url: &str,
        secret: &str,
        body: String,
    ) -> reqwest::StatusCode {
        let id = "msg_demo_test";
        let timestamp = chrono::Utc::now().timestamp();
        let signature = standard_webhooks_signature(secret, id, timestamp, &body).unwrap();
        http.post(format!("{url}/alerts/webhook"))
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
    }

    #[tokio::test]
    async fn demo_alert_webhook_refuses_a_bad_signature_and_records_a_good_one() {
        let (url, http) = serve().await;
        let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let status = post_webhook(&http, &url, other, webhook_body("queue_backlog")).await;
        assert_eq!(status, 401);
        let unsigned = http
            .post(format!("{url}/alerts/webhook"))
            .body(webhook_body("queue_backlog"))
            .send()
            .await
            .unwrap();
        assert_eq!(unsigned.status(), 401);

        let status = post_webhook(
            &http,
            &url,
            DEFAULT_WEBHOOK_SECRET,
            webhook_body("agent_failing"),
        )
        .await;
        assert_eq!(status, 204);
        let seen = calls(&http, &url, "alert-webhook").await;
        let statuses: Vec<u64> = seen.iter().map(|c| c["status"].as_u64().unwrap()).collect();
        assert_eq!(statuses, [401, 401, 204]);
        let good = &seen[2];
        assert_eq!(
            good["text"],
            "trigger agent_failing (agent): 6 agent probes failed in a row"
        );
        assert_eq!(good["alert"]["severity"], "critical");
        assert!(seen[0]["alert"].is_null());

        // An injected fault answers in place of the sink.
        http.post(format!("{url}/api/faults"))
            .json(&json!({"kind": "alert-webhook", "status": 503, "count": 1}))
            .send()
            .await
            .unwrap();
        let faulted = post_webhook(
            &http,
            &url,
            DEFAULT_WEBHOOK_SECRET,
            webhook_body("agent_failing"),
        )
        .await;
        assert_eq!(faulted, 503);
        let again = post_webhook(
            &http,
            &url,
            DEFAULT_WEBHOOK_SECRET,
            webhook_body("agent_failing"),
        )
        .await;
        assert_eq!(again, 204);
    }

    #[tokio::test]
    async fn demo_alert_slack_and_pagerduty_answer_like_the_real_ones() {
        let (url, http) = serve().await;
        let slack = http
            .post(format!("{url}/alerts/slack"))
            .json(&json!({"text": ":rotating_light: [WARNING] backlog_past_sla (org-1): 3 items past SLA\nRunbook: docs/OPERATIONS.md#alert-backlog-past-sla"}))
            .send()
            .await
            .unwrap();
        assert_eq!(slack.status(), 200);
        assert_eq!(slack.text().await.unwrap(), "ok");
        let seen = calls(&http, &url, "alert-slack").await;
        assert_eq!(
            seen[0]["text"],
            "trigger backlog_past_sla (org-1): 3 items past SLA"
        );
        assert_eq!(seen[0]["alert"]["severity"], "warning");

        let refused = http
            .post(format!("{url}/alerts/pagerduty/v2/enqueue"))
            .json(&json!({"dedup_key": "switchboard-1", "event_action": "resolve"}))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400);
        assert_eq!(
            refused.json::<Value>().await.unwrap()["status"],
            "invalid event"
        );

        let trigger = http
            .post(format!("{url}/alerts/pagerduty/v2/enqueue"))
            .json(&json!({
                "routing_key": "demo-routing-key",
                "event_action": "trigger",
                "dedup_key": "switchboard-1",
                "payload": {
                    "summary": "[CRITICAL] agent_failing (agent): 6 agent probes failed in a row",
                    "source": "localhost",
                    "severity": "critical",
                    "component": "agent_failing",
                    "group": "agent",
                },
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(trigger.status(), 202);
        let answer: Value = trigger.json().await.unwrap();
        assert_eq!(
            answer,
            json!({"status": "success", "message": "Event processed", "dedup_key": "switchboard-1"})
        );
        let resolve = http
            .post(format!("{url}/alerts/pagerduty/v2/enqueue"))
            .json(&json!({"routing_key": "demo-routing-key", "event_action": "resolve", "dedup_key": "switchboard-1"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resolve.status(), 202);
        let seen = calls(&http, &url, "alert-pagerduty").await;
        assert_eq!(seen.len(), 3);
        assert_eq!(
            seen[1]["text"],
            "trigger agent_failing (agent): 6 agent probes failed in a row"
        );
        assert_eq!(
            seen[2]["text"],
            "resolve agent_failing (agent): 6 agent probes failed in a row"
        );
        assert_eq!(seen[1]["body"]["routing_key"], "(not kept)");
    }

    /// Switchboard's own sink client, pointed at the fakes: every notice is taken, and each
    /// sink's record reads the same.
    #[tokio::test]
    async fn demo_alert_sinks_take_what_switchboard_sends() {
        let (url, http) = serve().await;
        let sinks = Sinks::new();
        let details = json!({"consecutive_failures": 6});
        let mut notice = Notice {
            delivery_id: uuid::Uuid::new_v4(),
            incident_id: uuid::Uuid::new_v4(),
            action: Action::Trigger,
            kind: "agent_failing",
            severity: "critical",
            scope: "agent",
            summary: "6 agent probes failed in a row",
            details: &details,
            runbook: "docs/OPERATIONS.md#alert-agent-failing",
            opened_at: chrono::Utc::now(),
            resolved_at: None,
            source: "localhost",
        };
        for action in [Action::Trigger, Action::Resolve] {
            notice.action = action;
            notice.delivery_id = uuid::Uuid::new_v4();
            sinks
                .slack(&format!("{url}/alerts/slack"), &notice)
                .await
                .unwrap();
            sinks
                .pagerduty(
                    &format!("{url}/alerts/pagerduty/v2/enqueue"),
                    "demo-routing-key",
                    &notice,
                )
                .await
                .unwrap();
            sinks
                .webhook(
                    &format!("{url}/alerts/webhook"),
                    DEFAULT_WEBHOOK_SECRET,
                    &notice,
                )
                .await
                .unwrap();
        }
        for kind in ["alert-slack", "alert-pagerduty", "alert-webhook"] {
            let texts: Vec<Value> = calls(&http, &url, kind)
                .await
                .iter()
                .map(|c| c["text"].clone())
                .collect();
            assert_eq!(
                texts,
                [
                    "trigger agent_failing (agent): 6 agent probes failed in a row",
                    "resolve agent_failing (agent): 6 agent probes failed in a row"
                ],
                "{kind}"
            );
        }
    }

    /// The agent's health probe fails while an `agent` fault is set, without using it up.
    #[tokio::test]
    async fn demo_agent_probe_follows_the_agent_fault() {
        let (url, http) = serve().await;
        let probe = || async {
            http.get(format!("{url}/agent"))
                .send()
                .await
                .unwrap()
                .status()
        };
        assert_eq!(probe().await, 200);
        let fault = |status: u16| {
            http.post(format!("{url}/api/faults"))
                .json(&json!({"kind": "agent", "status": status}))
                .send()
        };
        fault(503).await.unwrap();
        assert_eq!(probe().await, 503);
        assert_eq!(probe().await, 503);
        fault(0).await.unwrap();
        assert_eq!(probe().await, 200);
    }

    #[test]
    fn demo_alert_headlines_are_read_back() {
        let resolved = slack_alert(
            ":white_check_mark: [RESOLVED] reply_dead (abc): a reply is dead\nRunbook: x",
        );
        assert_eq!(resolved.line(), "resolve reply_dead (abc): a reply is dead");
        let odd = headline_alert("something else entirely");
        assert_eq!(odd.kind, None);
        assert_eq!(odd.summary.as_deref(), Some("something else entirely"));
    }
}
