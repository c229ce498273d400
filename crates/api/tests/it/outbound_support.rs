//! Set-up for the outbound delivery tests: a fake provider that records every call (with
//! its time) and answers from a script, pods wired to it, releasable items, and helpers
//! that wait for rows instead of sleeping.

use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use switchboard_domain::Role;
use switchboard_testing::signing::secrets;
use switchboard_testing::{TestDb, TestPod, seed_member};
use uuid::Uuid;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub use crate::outbound_alerts::alerts_for;

/// One call the fake provider received.
#[derive(Debug, Clone)]
pub struct Call {
    pub at: Instant,
    pub method: String,
    /// Without the channel prefix the fake serves it under (`/chat.postMessage`).
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Call {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn form(&self) -> HashMap<String, String> {
        serde_urlencoded::from_bytes(&self.body).unwrap()
    }

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

/// All four providers on one fake server, each under its own prefix (`/slack`, `/twilio`,
/// `/telegram`, `/resend`). Unscripted calls are accepted the way each provider accepts.
pub struct Provider {
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

/// How each provider accepts a message, with id `n`.
pub fn accepted(prefix: &str, n: u64) -> ResponseTemplate {
    let body = match prefix {
        "slack" => json!({"ok": true, "channel": "C1", "ts": format!("1700000100.{n:06}")}),
        "twilio" => json!({"sid": format!("SM{n:032}"), "status": "queued"}),
        "telegram" => json!({"ok": true, "result": {"message_id": 9000 + n}}),
        _ => json!({"id": format!("email-{n}")}),
    };
    ResponseTemplate::new(200).set_body_json(body)
}

impl Provider {
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

    fn env(&self) -> Vec<(String, String)> {
        [
            ("SLACK_API_BASE", "slack"),
            ("TWILIO_API_BASE", "twilio"),
            ("TELEGRAM_API_BASE", "telegram"),
            ("RESEND_API_BASE", "resend"),
        ]
        .into_iter()
        .map(|(k, p)| (k.to_owned(), format!("{}/{p}", self.server.uri())))
        .collect()
    }
}

/// A pod whose replies go to `provider`, with fast retries and sweeps; `extra` wins.
pub async fn pod(
    db: &TestDb,
    prefix: &str,
    provider: &Provider,
    agent: &str,
    extra: &[(&str, &str)],
) -> TestPod {
    let mut vars = provider.env();
    let defaults = [
        ("AGENT_URL", agent),
        ("INBOX_GRACE_SECS", "1"),
        ("INBOX_SWEEP_INTERVAL_MS", "300"),
        ("INBOX_LEASE_SECS", "5"),
        ("OUTBOX_GRACE_SECS", "1"),
        ("OUTBOX_SWEEP_INTERVAL_MS", "300"),
        ("OUTBOUND_RETRY_BASE_MS", "20"),
        ("OUTBOUND_TIMEOUT_MS", "2000"),
        ("OUTBOUND_BREAKER_THRESHOLD", "1000"),
        ("DEAD_LETTER_INTERVAL_MS", "3600000"),
    ];
    vars.extend(
        defaults
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    vars.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    TestPod::start_with(db, &switchboard_testing::redis_url(), prefix, move |v| {
        v.extend(vars)
    })
    .await
}

/// An org with an admin (`token`) and one connection per channel.
pub struct Org {
    pub id: Uuid,
    pub token: String,
    pub conns: HashMap<&'static str, Uuid>,
}

pub async fn org(db: &TestDb, pod: &TestPod) -> Org {
    let (id, email, password) = seed_member(db, None, Role::Admin).await;
    let token = pod.login(&email, &password).await;
    let mut conns = HashMap::new();
    for channel in ["slack", "whatsapp", "telegram", "email"] {
        let conn = connection(pod, &token, id, channel, channel, secrets(channel)).await;
        conns.insert(channel, conn);
    }
    Org { id, token, conns }
}

/// Creates a connection through the API (its secrets are encrypted like any other).
pub async fn connection(
    pod: &TestPod,
    token: &str,
    org: Uuid,
    channel: &str,
    name: &str,
    secrets: Value,
) -> Uuid {
    let body = json!({"org_id": org, "channel": channel, "name": name, "secrets": secrets});
    let r = pod
        .client
        .post(pod.url("/channel-connections"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    created["id"].as_str().unwrap().parse().unwrap()
}

/// A pending queue item (customer, conversation, inbound message with `reply_to`, draft)
/// written directly, for tests where the inbound flow is not the subject.
pub async fn seed_item(db: &TestDb, org: Uuid, channel: &str, conn: Uuid, reply_to: Value) -> Uuid {
    let pool = db.pool().await;
    let tag = Uuid::new_v4().simple().to_string();
    let id = sqlx::query_scalar(
        "WITH cu AS (
           INSERT INTO customers (org_id, channel, external_id) VALUES ($1, $2::channel_kind, $3)
           RETURNING id
         ), conv AS (
           INSERT INTO conversations (org_id, customer_id, channel, connection_id)
           SELECT $1, cu.id, $2::channel_kind, $4 FROM cu RETURNING id
         ), msg AS (
           INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                                 channel_message_id, reply_to)
           SELECT $1, conv.id, 'inbound', 'customer', 'Where is my order?', $2::channel_kind, $3, $5
           FROM conv RETURNING id, conversation_id
         ), d AS (
           INSERT INTO drafts (org_id, conversation_id, message_id, body, confidence)
           SELECT $1, conversation_id, id, 'It ships tomorrow.', 0.8 FROM msg
           RETURNING id, conversation_id, message_id, body, confidence
         )
         INSERT INTO expert_queue (org_id, conversation_id, draft_id, draft_message_id, draft_body,
                                   draft_confidence)
         SELECT $1, d.conversation_id, d.id, d.message_id, d.body, d.confidence FROM d RETURNING id",
    )
    .bind(org)
    .bind(channel)
    .bind(tag)
    .bind(conn)
    .bind(reply_to)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    id
}

/// `POST /expert-queue/{item}/release`; returns the status and the body.
pub async fn release(pod: &TestPod, token: &str, item: Uuid, body: Option<&str>) -> (u16, Value) {
    let r = pod
        .client
        .post(pod.url(&format!("/expert-queue/{item}/release")))
        .bearer_auth(token)
        .json(&json!({"body": body}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Releases `item` and returns its outbox id.
pub async fn release_ok(pod: &TestPod, token: &str, item: Uuid, body: Option<&str>) -> Uuid {
    let (status, answer) = release(pod, token, item, body).await;
    assert_eq!(status, 200, "{answer}");
    answer["message"]["outbox_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// One outbox row with its message, as the tests check them.
#[derive(Debug, sqlx::FromRow)]
pub struct Delivery {
    pub outbox_status: String,
    pub attempts: i32,
    pub parts: Value,
    pub provider_id: Option<String>,
    pub delivery_status: Option<String>,
    pub provider_message_id: Option<String>,
    pub delivered: bool,
    pub delivery_error: Option<String>,
}

pub async fn delivery(db: &TestDb, outbox_id: Uuid) -> Delivery {
    let pool = db.pool().await;
    let row = sqlx::query_as(
        "SELECT o.status AS outbox_status, o.attempts, o.parts, o.provider_id, m.delivery_status,
                m.provider_message_id, m.delivered_at IS NOT NULL AS delivered, m.delivery_error
         FROM outbox o JOIN messages m ON m.id = o.message_id WHERE o.id = $1",
    )
    .bind(outbox_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    row
}

/// Waits (30 s at most) until the outbox row has `status`.
pub async fn wait_outbox(db: &TestDb, outbox_id: Uuid, status: &str) -> Delivery {
    let sql =
        format!("SELECT count(*) FROM outbox WHERE id = '{outbox_id}' AND status = '{status}'");
    db.wait_for_count(&sql, 1).await;
    delivery(db, outbox_id).await
}
