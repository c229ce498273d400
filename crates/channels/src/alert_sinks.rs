//! Where operators hear about incidents: a Slack incoming webhook, PagerDuty's Events API
//! v2 and a generic JSON webhook signed the Standard Webhooks way
//! (<https://www.standardwebhooks.com>). Each call is one attempt; the caller
//! (`switchboard_jobs::alerts`) retries what [`SinkError::retryable`] allows.

use crate::outbound::read_capped;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use std::time::Duration;
use uuid::Uuid;

/// How long one call may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Most of an error answer kept for the delivery's `last_error`.
const ANSWER_CAP: usize = 4096;

/// Whether an incident opened or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// It opened.
    Trigger,
    /// It cleared.
    Resolve,
}

impl Action {
    /// `trigger` or `resolve`, as PagerDuty and the webhook payload spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Trigger => "trigger",
            Action::Resolve => "resolve",
        }
    }
}

/// One incident change, as every sink gets it.
#[derive(Debug, Clone)]
pub struct Notice<'a> {
    /// The delivery: the webhook's message id, stable across retries.
    pub delivery_id: Uuid,
    /// The incident: PagerDuty's `dedup_key` is derived from it, so the resolve finds the
    /// trigger.
    pub incident_id: Uuid,
    /// Opened or resolved.
    pub action: Action,
    /// `agent_failing`, …
    pub kind: &'a str,
    /// `info`, `warning` or `critical`.
    pub severity: &'a str,
    /// Which instance (`agent`, an org id, a job name).
    pub scope: &'a str,
    /// One line.
    pub summary: &'a str,
    /// Figures behind it.
    pub details: &'a Value,
    /// Where its runbook is.
    pub runbook: &'a str,
    /// When it opened.
    pub opened_at: DateTime<Utc>,
    /// When it resolved.
    pub resolved_at: Option<DateTime<Utc>>,
    /// The deployment (`PUBLIC_BASE_URL`'s host), PagerDuty's `source`.
    pub source: &'a str,
}

impl Notice<'_> {
    fn headline(&self) -> String {
        match self.action {
            Action::Trigger => format!(
                "[{}] {} ({}): {}",
                self.severity.to_uppercase(),
                self.kind,
                self.scope,
                self.summary
            ),
            Action::Resolve => format!(
                "[RESOLVED] {} ({}): {}",
                self.kind, self.scope, self.summary
            ),
        }
    }

    /// PagerDuty's `dedup_key`: one per incident, the same for its trigger and resolve.
    pub fn dedup_key(&self) -> String {
        format!("switchboard-{}", self.incident_id)
    }

    /// The generic webhook's JSON body.
    pub fn webhook_body(&self) -> Value {
        json!({
            "type": format!("alert.{}", self.action.as_str()),
            "timestamp": Utc::now(),
            "data": {
                "incident_id": self.incident_id,
                "kind": self.kind,
                "severity": self.severity,
                "scope": self.scope,
                "summary": self.summary,
                "details": self.details,
                "runbook": self.runbook,
                "opened_at": self.opened_at,
                "resolved_at": self.resolved_at,
                "source": self.source,
            }
        })
    }
}

/// Why a sink did not take a notice.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// A network error, a timeout, 429 or 5xx: worth another try.
    #[error("{0}")]
    Unavailable(String),
    /// The sink refused (a bad URL, key or payload): no retry will help.
    #[error("{0}")]
    Refused(String),
}

impl SinkError {
    /// Whether another attempt may succeed.
    pub fn retryable(&self) -> bool {
        matches!(self, SinkError::Unavailable(_))
    }
}

/// The HTTP client the sinks share; cheap to clone.
#[derive(Debug, Clone)]
pub struct Sinks {
    http: reqwest::Client,
}

impl Default for Sinks {
    fn default() -> Self {
        Self::new()
    }
}

impl Sinks {
    /// A client with [`TIMEOUT`].
    pub fn new() -> Self {
        crate::install_tls_provider();
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        Self { http }
    }

    /// Posts the notice to a Slack incoming webhook.
    pub async fn slack(&self, url: &str, notice: &Notice<'_>) -> Result<(), SinkError> {
        let emoji = match notice.action {
            Action::Trigger => ":rotating_light:",
            Action::Resolve => ":white_check_mark:",
        };
        let body = json!({
            "text": format!("{emoji} {}\nRunbook: {}", notice.headline(), notice.runbook),
        });
        self.post(self.http.post(url).json(&body)).await
    }

    /// Sends the notice to PagerDuty's Events API v2: `trigger` or `resolve` with the
    /// incident's stable `dedup_key`.
    pub async fn pagerduty(
        &self,
        url: &str,
        routing_key: &str,
        notice: &Notice<'_>,
    ) -> Result<(), SinkError> {
        let mut body = json!({
            "routing_key": routing_key,
            "event_action": notice.action.as_str(),
            "dedup_key": notice.dedup_key(),
        });
        if notice.action == Action::Trigger {
            body["payload"] = json!({
                "summary": truncate(&notice.headline(), 1024),
                "source": notice.source,
                "severity": notice.severity,
                "component": notice.kind,
                "group": notice.scope,
                "timestamp": notice.opened_at,
                "custom_details": notice.details,
            });
            body["links"] = json!([{"href": notice.runbook, "text": "Runbook"}]);
        }
        self.post(self.http.post(url).json(&body)).await
    }

    /// Posts the notice's JSON to a webhook, signed the Standard Webhooks way with
    /// `secret` (`whsec_` and the base64 key).
    pub async fn webhook(
        &self,
        url: &str,
        secret: &str,
        notice: &Notice<'_>,
    ) -> Result<(), SinkError> {
        let body = notice.webhook_body().to_string();
        let id = format!("msg_{}", notice.delivery_id.simple());
        let timestamp = Utc::now().timestamp();
        let signature = standard_webhooks_signature(secret, &id, timestamp, &body)
            .ok_or_else(|| SinkError::Refused("ALERT_WEBHOOK_SECRET is not a valid key".into()))?;
        let request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body);
        self.post(request).await
    }

    async fn post(&self, request: reqwest::RequestBuilder) -> Result<(), SinkError> {
        let response = request
            .send()
            .await
            .map_err(|e| SinkError::Unavailable(e.without_url().to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let answer = read_capped(response, ANSWER_CAP).await.unwrap_or_default();
        let text = format!(
            "HTTP {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&answer).trim()
        );
        if status.as_u16() == 429 || status.is_server_error() {
            Err(SinkError::Unavailable(text))
        } else {
            Err(SinkError::Refused(text))
        }
    }
}

/// The `webhook-signature` header of a Standard Webhooks message: `v1,` and the base64
/// HMAC-SHA256 of `{id}.{timestamp}.{body}` under the secret's key (the part after `whsec_`,
/// base64). `None` when the secret is not such a key.
pub fn standard_webhooks_signature(
    secret: &str,
    id: &str,
    timestamp: i64,
    body: &str,
) -> Option<String> {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::standard_webhooks_signature;

    /// The example of the Standard Webhooks specification's reference libraries.
    #[test]
    fn the_signature_matches_the_reference_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            standard_webhooks_signature(secret, id, 1614265330, body).as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
        assert_eq!(standard_webhooks_signature("whsec_%%%", id, 1, body), None);
    }
}
