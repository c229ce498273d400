//! What the channel tests share: a fake provider, a request and a dead address.

use super::{PartOutcome, PartRequest, ProviderBases, Providers};
use serde_json::Value;
use std::time::Duration;
use switchboard_domain::ChannelKind;
use url::Url;
use wiremock::{Mock, MockServer, Request, ResponseTemplate, matchers::any};

pub use serde_json::json;
pub use wiremock::ResponseTemplate as Reply;

/// A fake provider answering every request with `reply`.
pub async fn provider(reply: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any()).respond_with(reply).mount(&server).await;
    server
}

/// The one request the fake provider received.
pub async fn only_request(server: &MockServer) -> Request {
    let mut got = server.received_requests().await.expect("recording is on");
    assert_eq!(got.len(), 1, "exactly one call per part");
    got.remove(0)
}

/// Every provider at `base` (the fake's URI plus whatever path prefix the test wants).
pub fn providers(base: &str) -> Providers {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = Url::parse(base).expect("base url");
    let bases = ProviderBases {
        slack: url.clone(),
        whatsapp: url.clone(),
        telegram: url.clone(),
        resend: url,
    };
    Providers::new(bases, Duration::from_millis(500)).expect("client")
}

/// An address nothing listens on: a port the OS just handed out and took back.
pub fn closed_base() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    format!("http://127.0.0.1:{port}")
}

/// Part 0 of 1 of outbox message `outbox-1`.
pub fn part<'a>(
    channel: ChannelKind,
    secrets: &'a Value,
    reply_to: &'a Value,
    text: &'a str,
) -> PartRequest<'a> {
    PartRequest {
        channel,
        secrets,
        reply_to,
        customer_external_id: "customer-1",
        text,
        idempotency_key: "outbox-1",
        part: 0,
        parts: 1,
    }
}

pub fn header<'r>(request: &'r Request, name: &str) -> &'r str {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The dispatch job spawns sends, so the future must be `Send`; this fails to compile
/// otherwise.
#[test]
fn send_part_future_is_send() {
    fn is_send<T: Send>(_: &T) {}
    let p = providers("http://127.0.0.1:9");
    let (secrets, reply_to) = (json!({}), json!({}));
    let req = part(ChannelKind::Slack, &secrets, &reply_to, "hi");
    is_send(&p.send_part(&req));
}

/// The outcome flattened for one-line assertions: kind, after (seconds), status, reason.
pub fn verdict(outcome: &PartOutcome) -> (&'static str, Option<u64>, Option<u16>, &str) {
    match outcome {
        PartOutcome::Accepted { provider_id } => ("accepted", None, None, provider_id),
        PartOutcome::Retry {
            after,
            reason,
            status,
        } => ("retry", after.map(|d| d.as_secs()), *status, reason),
        PartOutcome::Permanent { reason, status } => ("permanent", None, *status, reason),
    }
}
