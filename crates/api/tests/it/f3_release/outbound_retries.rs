//! Retries within a delivery round: transient failures are retried and the reply is sent
//! once, a provider's own wait is honoured (in the worker, or by rescheduling a longer
//! wait), and a permanent refusal goes to the dead-letter table at once.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_testing::{Org, Provider, TestApp, TestDb, User, delivery, seed_item, wait_outbox};
use uuid::Uuid;
use wiremock::ResponseTemplate;

fn slack_reply_to() -> Value {
    json!({"channel": "C1", "thread_ts": "1700000000.000100"})
}

/// A new org's reply to a pending item of `channel` (answering `reply_to`), released by its
/// admin once the test told the provider how to answer; the org and the outbox id.
async fn release_one(app: &TestApp, channel: &str, reply_to: Value) -> (Org, Uuid) {
    let org = app.org().await;
    let item = seed_item(&app.db, org.id, channel, org.conns[channel], reply_to).await;
    let outbox = app.pod(0).as_user(&org.token).release_ok(item, None).await;
    (org, outbox)
}

/// The delivery statuses the console was told about for `outbox`'s message, in order.
async fn status_events(db: &TestDb, outbox: Uuid) -> Vec<String> {
    let pool = db.pool().await;
    let statuses = sqlx::query_scalar(
        "SELECT e.payload->>'delivery_status' FROM (
           SELECT event, payload FROM event_outbox UNION ALL SELECT event, payload FROM events
         ) e JOIN outbox o ON o.message_id = (e.payload->>'message_id')::uuid
         WHERE e.event = 'message_status_updated' AND o.id = $1
         ORDER BY (e.payload->>'at')::timestamptz",
    )
    .bind(outbox)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    statuses
}

/// `GET /conversations/{id}` as the expert sees the reply: its `delivery` object.
async fn delivery_seen(user: User<'_>, db: &TestDb, outbox: Uuid) -> Value {
    let pool = db.pool().await;
    let (conversation, message): (Uuid, Uuid) =
        sqlx::query_as("SELECT conversation_id, message_id FROM outbox WHERE id = $1")
            .bind(outbox)
            .fetch_one(&pool)
            .await
            .unwrap();
    pool.close().await;
    let (status, body) = user.get(&format!("/conversations/{conversation}")).await;
    assert_eq!(status, 200);
    let messages = body["messages"].as_array().unwrap();
    let reply = messages.iter().find(|m| m["id"] == message.to_string());
    reply.expect("the reply is in the conversation")["delivery"].clone()
}

#[tokio::test]
async fn two_server_errors_then_success_deliver_once_with_the_provider_id() {
    let app = TestApp::builder().fake_provider().build().await;
    let (db, provider) = (&app.db, app.provider());
    provider.script(vec![ResponseTemplate::new(500), ResponseTemplate::new(500)]);
    let (org, outbox) = release_one(&app, "slack", slack_reply_to()).await;
    let expert = app.pod(0).as_user(&org.token);

    let sent = wait_outbox(db, outbox, "sent").await;
    assert_eq!(provider.calls("slack").len(), 3, "500, 500, 200");
    assert_eq!(sent.provider_id.as_deref(), Some("1700000100.000001"));
    assert_eq!(
        sent.provider_message_id.as_deref(),
        Some("1700000100.000001")
    );
    assert_eq!(sent.attempts, 2, "two failed attempts in the round");
    assert!(sent.delivered && sent.delivery_error.is_none());
    assert_eq!(status_events(db, outbox).await, ["retry", "retry", "sent"]);
    let seen = delivery_seen(expert, db, outbox).await;
    assert_eq!(seen["status"], "sent");
    assert_eq!(seen["provider_message_id"], "1700000100.000001");
    assert_eq!(
        db.count("SELECT count(*) FROM channel_failures").await,
        0,
        "a round that ends well leaves no dead letter"
    );
}

/// Slack was called twice, the second time `wait` or more after the first.
fn assert_retried_after(provider: &Provider, wait: Duration) {
    let calls = provider.calls("slack");
    assert_eq!(calls.len(), 2);
    let gap = calls[1].at - calls[0].at;
    assert!(gap >= wait, "retried after {gap:?}");
}

fn rate_limited(seconds: u64) -> ResponseTemplate {
    ResponseTemplate::new(429)
        .insert_header("Retry-After", seconds.to_string().as_str())
        .set_body_json(json!({"ok": false, "error": "ratelimited"}))
}

#[tokio::test]
async fn retry_after_is_honoured_by_the_worker() {
    let app = TestApp::builder().fake_provider().build().await;
    let (db, provider) = (&app.db, app.provider());
    provider.script(vec![rate_limited(2)]);
    let (_, outbox) = release_one(&app, "slack", slack_reply_to()).await;

    wait_outbox(db, outbox, "sent").await;
    assert_retried_after(provider, Duration::from_secs(2));
}

#[tokio::test]
async fn a_wait_longer_than_the_worker_holds_reschedules_the_job() {
    let app = TestApp::builder()
        .fake_provider()
        .env("OUTBOUND_MAX_INLINE_WAIT_MS", "500")
        .build()
        .await;
    let (db, provider) = (&app.db, app.provider());
    provider.script(vec![rate_limited(2)]);
    let (_, outbox) = release_one(&app, "slack", slack_reply_to()).await;

    // While it waits, no worker holds the row.
    let waiting = format!(
        "SELECT count(*) FROM outbox WHERE id = '{outbox}' AND status = 'retry'
           AND locked_until IS NULL AND next_attempt_at > now() + interval '1 second'"
    );
    assert_eq!(db.wait_for_count(&waiting, 1).await, 1);
    wait_outbox(db, outbox, "sent").await;
    assert_retried_after(provider, Duration::from_secs(2));
}

#[tokio::test]
async fn a_permanent_refusal_is_dead_lettered_at_once_without_a_retry() {
    let app = TestApp::builder().fake_provider().build().await;
    let (db, provider) = (&app.db, app.provider());
    let blocked = json!({"ok": false, "error_code": 403,
                         "description": "Forbidden: bot was blocked by the user"});
    provider.always(Some(ResponseTemplate::new(403).set_body_json(blocked)));
    let reply_to = json!({"chat_id": 555, "message_id": 7});
    let (org, outbox) = release_one(&app, "telegram", reply_to).await;
    let expert = app.pod(0).as_user(&org.token);

    let failed = wait_outbox(db, outbox, "failed").await;
    assert_eq!(failed.delivery_status.as_deref(), Some("failed"));
    assert!(failed.delivery_error.unwrap().contains("blocked the bot"));
    let pool = db.pool().await;
    let (status, attempts, provider_status, error): (String, i32, Option<i32>, String) =
        sqlx::query_as(
            "SELECT status, attempts, provider_status, error FROM channel_failures WHERE outbox_id = $1",
        )
        .bind(outbox)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(
        (status.as_str(), attempts, provider_status),
        ("queued", 1, Some(403))
    );
    assert!(error.contains("blocked the bot"), "{error}");
    let seen = delivery_seen(expert, db, outbox).await;
    assert_eq!(seen["status"], "failed");
    assert!(seen["error"].as_str().unwrap().contains("blocked the bot"));
    // Several sweeper slots later, still the one call.
    db.wait_for_job_runs("outbox-sweeper", 3).await;
    assert_eq!(provider.calls("telegram").len(), 1);
    assert_eq!(delivery(db, outbox).await.outbox_status, "failed");
}
