//! The world outside a pod, faked with `wiremock`: the agent that drafts replies and the
//! four providers' APIs that receive them.

use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use switchboard_channels::provider;
use switchboard_domain::ChannelKind;
use wiremock::matchers::{any, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// An agent that always drafts "Happy to help!" at once.
pub async fn agent() -> MockServer {
    agent_answering(
        ResponseTemplate::new(200).set_body_json(
            json!({"reply": "Happy to help!", "confidence": 0.9, "cost_usd": 0.002}),
        ),
    )
    .await
}

/// An agent that answers every draft request with `reply` (a delay, an error status …).
pub async fn agent_answering(reply: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(reply)
        .mount(&server)
        .await;
    server
}

/// Answers the first `POST {route}` on `server` with `first` and every later one with
/// `then`: a call that fails or hangs once, then succeeds.
pub async fn first_then(
    server: &MockServer,
    route: &str,
    first: ResponseTemplate,
    then: ResponseTemplate,
) {
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(first)
        .up_to_n_times(1)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(then)
        .with_priority(2)
        .mount(server)
        .await;
}

/// An agent whose first draft request gets `first` and every later one `then`.
pub async fn agent_first_then(first: ResponseTemplate, then: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    first_then(&server, "/v1/chat", first, then).await;
    server
}

/// An agent that answers each draft request as `respond` decides, for drafts that depend
/// on the conversation.
pub async fn agent_responding(respond: impl Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(respond)
        .mount(&server)
        .await;
    server
}

/// The newest customer line of a draft request to the agent (the request carries the whole
/// conversation), for fakes whose draft depends on what the customer wrote.
pub fn newest_customer_line(request: &Request) -> Option<String> {
    let body: Value = serde_json::from_slice(&request.body).ok()?;
    body["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|l| l["role"] == "customer")?["text"]
        .as_str()
        .map(str::to_owned)
}

/// One call the fake provider received.
#[derive(Debug, Clone)]
pub struct Call {
    /// When it arrived.
    pub at: Instant,
    /// `POST`, …
    pub method: String,
    /// Without the channel prefix the fake serves it under (`/chat.postMessage`).
    pub path: String,
    /// Header names (lowercase) and values.
    pub headers: HashMap<String, String>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl Call {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// The body as a form.
    pub fn form(&self) -> HashMap<String, String> {
        serde_urlencoded::from_bytes(&self.body).unwrap()
    }

    /// A header's value, empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Shared {
    calls: Mutex<Vec<(String, Call)>>,
    script: Mutex<VecDeque<ResponseTemplate>>,
    fallback: Mutex<Option<ResponseTemplate>>,
    ids: AtomicU64,
}

/// All four providers on one fake server, each under its own prefix (`/slack`, WhatsApp's
/// [`switchboard_channels::whatsapp::PROVIDER`], `/telegram`, `/resend`). Unscripted calls are
/// accepted the way each provider accepts.
pub struct Provider {
    /// The fake server.
    pub server: MockServer,
    shared: Arc<Shared>,
}

struct Responder(Arc<Shared>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let full = request.url.path().to_owned();
        let (prefix, rest) = full[1..].split_once('/').unwrap_or((&full[1..], ""));
        let call = Call {
            at: Instant::now(),
            method: request.method.to_string(),
            path: format!("/{rest}"),
            headers: request
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            body: request.body.clone(),
        };
        self.0.calls.lock().unwrap().push((prefix.to_owned(), call));
        if let Some(reply) = self.0.script.lock().unwrap().pop_front() {
            return reply;
        }
        if let Some(reply) = self.0.fallback.lock().unwrap().clone() {
            return reply;
        }
        let n = self.0.ids.fetch_add(1, Ordering::SeqCst) + 1;
        accepted(prefix, n)
    }
}

/// How each provider accepts a message, with id `n` (under a prefix that is no provider's,
/// as Resend does).
pub fn accepted(prefix: &str, n: u64) -> ResponseTemplate {
    let channel = ChannelKind::ALL
        .into_iter()
        .find(|c| switchboard_channels::provider(*c) == prefix);
    let body = match channel {
        Some(ChannelKind::Slack) => {
            json!({"ok": true, "channel": "C1", "ts": format!("1700000100.{n:06}")})
        }
        Some(ChannelKind::Whatsapp) => json!({"sid": format!("SM{n:032}"), "status": "queued"}),
        Some(ChannelKind::Telegram) => json!({"ok": true, "result": {"message_id": 9000 + n}}),
        Some(ChannelKind::Email) | None => json!({"id": format!("email-{n}")}),
    };
    ResponseTemplate::new(200).set_body_json(body)
}

impl Provider {
    /// Starts the fake.
    pub async fn start() -> Provider {
        let server = MockServer::start().await;
        let shared = Arc::new(Shared::default());
        Mock::given(any())
            .respond_with(Responder(shared.clone()))
            .mount(&server)
            .await;
        Provider { server, shared }
    }

    /// Answers the next calls with `replies`, in order, then as before.
    pub fn script(&self, replies: Vec<ResponseTemplate>) {
        self.shared.script.lock().unwrap().extend(replies);
    }

    /// Answers every unscripted call with `reply` (`None`: accept again).
    pub fn always(&self, reply: Option<ResponseTemplate>) {
        *self.shared.fallback.lock().unwrap() = reply;
    }

    /// Every call to the provider under `prefix` so far.
    pub fn calls(&self, prefix: &str) -> Vec<Call> {
        let calls = self.shared.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(p, _)| p == prefix)
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// The pod settings that send every channel's replies here.
    pub fn env(&self) -> Vec<(String, String)> {
        ChannelKind::ALL
            .into_iter()
            .map(|channel| {
                let variable = match channel {
                    ChannelKind::Slack => "SLACK_API_BASE",
                    ChannelKind::Whatsapp => "TWILIO_API_BASE",
                    ChannelKind::Telegram => "TELEGRAM_API_BASE",
                    ChannelKind::Email => "RESEND_API_BASE",
                };
                let base = format!("{}/{}", self.server.uri(), provider(channel));
                (variable.to_owned(), base)
            })
            .collect()
    }
}
