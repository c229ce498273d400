use crate::serve_ready;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use switchboard_domain::Role;
use switchboard_testing::signing::secrets;
use switchboard_testing::{
    TestDb, TestPod, free_port, pod_env, random_prefix, redis_url, seed_member,
};
use uuid::Uuid;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A pending item on `connection` (customer, conversation, inbound message, draft).
async fn seed_item(db: &TestDb, org: Uuid, connection: Uuid) -> Uuid {
    let pool = db.pool().await;
    let item = sqlx::query_scalar(
        "WITH cu AS (
           INSERT INTO customers (org_id, channel, external_id) VALUES ($1, 'slack', 'U1') RETURNING id
         ), conv AS (
           INSERT INTO conversations (org_id, customer_id, channel, connection_id)
           SELECT $1, cu.id, 'slack', $2 FROM cu RETURNING id
         ), msg AS (
           INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                                 channel_message_id, reply_to)
           SELECT $1, conv.id, 'inbound', 'customer', 'hello?', 'slack', 'C1:1.5',
                  '{\"channel\": \"C1\", \"thread_ts\": \"1.5\"}'::jsonb
           FROM conv RETURNING id, conversation_id
         ), d AS (
           INSERT INTO drafts (org_id, conversation_id, message_id, body)
           SELECT $1, conversation_id, id, 'On its way.' FROM msg
           RETURNING id, conversation_id, message_id, body
         )
         INSERT INTO expert_queue (org_id, conversation_id, draft_id, draft_message_id, draft_body)
         SELECT $1, conversation_id, id, message_id, body FROM d RETURNING id",
    )
    .bind(org)
    .bind(connection)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    item
}

async fn post(http: &reqwest::Client, url: String, token: Option<&str>, body: Value) -> Value {
    let mut req = http.post(url).json(&body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let response = req.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

/// kill -9 of the pod whose provider call is in flight (the provider never answered it):
/// the other pod delivers the reply, and the customer gets it once.
#[tokio::test]
async fn outbound_a_pod_killed_mid_send_is_delivered_by_the_other_pod_once() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let slack = MockServer::start().await;
    let ok = |ts: &str| json!({"ok": true, "channel": "C1", "ts": ts});
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(60))
                .set_body_json(ok("1.000001")),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&slack)
        .await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(ResponseTemplate::new(200).set_body_json(ok("2.000002")))
        .with_priority(2)
        .mount(&slack)
        .await;

    let port = free_port();
    let mut vars = pod_env(&db, &redis_url(), &prefix);
    vars.insert("PORT".into(), port.to_string());
    vars.insert("SLACK_API_BASE".into(), slack.uri());
    vars.insert("OUTBOUND_TIMEOUT_MS".into(), "120000".into());
    // Pod A never sweeps within this test, so recovery is pod B's doing; its lease on the
    // row outlives it by 2 s only.
    vars.insert("OUTBOX_SWEEP_INTERVAL_MS".into(), "3600000".into());
    vars.insert("OUTBOX_LEASE_SECS".into(), "2".into());
    let (mut child, base) = serve_ready(&vars).await;
    let http = switchboard_testing::http();

    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let login = json!({"email": email, "password": password});
    let token = post(&http, format!("{base}/auth/login"), None, login).await;
    let token = token["token"].as_str().unwrap().to_owned();
    let conn = json!({"org_id": org, "channel": "slack", "name": "s", "secrets": secrets("slack")});
    let conn = post(
        &http,
        format!("{base}/channel-connections"),
        Some(&token),
        conn,
    )
    .await;
    let item = seed_item(&db, org, conn["id"].as_str().unwrap().parse().unwrap()).await;
    let url = format!("{base}/expert-queue/{item}/release");
    let released = post(&http, url, Some(&token), json!({})).await;
    let outbox = released["message"]["outbox_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Wait until pod A's call is at the provider, then kill -9.
    let deadline = Instant::now() + Duration::from_secs(20);
    while slack.received_requests().await.unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the reply never reached the provider"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let sent = format!("SELECT count(*) FROM outbox WHERE id = '{outbox}' AND status = 'sent'");
    assert_eq!(db.count(&sent).await, 0);

    // Pod B, same Postgres and Redis: its sweeper finds the row once A's lease lapsed.
    let slack_base = slack.uri();
    let _b = TestPod::start_with(&db, &redis_url(), &prefix, move |v| {
        v.insert("SLACK_API_BASE".into(), slack_base);
        v.insert("OUTBOX_GRACE_SECS".into(), "1".into());
        v.insert("OUTBOX_SWEEP_INTERVAL_MS".into(), "300".into());
    })
    .await;
    assert_eq!(db.wait_for_count(&sent, 1).await, 1, "pod B delivered it");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        slack.received_requests().await.unwrap().len(),
        2,
        "the unanswered call and pod B's"
    );
    let delivered = format!(
        "SELECT count(*) FROM outbox o JOIN messages m ON m.id = o.message_id
         WHERE o.id = '{outbox}' AND o.parts = '[\"2.000002\"]'::jsonb
           AND m.delivery_status = 'sent' AND m.provider_message_id = '2.000002'"
    );
    assert_eq!(db.count(&delivered).await, 1, "one accepted part, pod B's");
}
