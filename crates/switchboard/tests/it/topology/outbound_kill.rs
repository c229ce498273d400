use crate::{process_env, serve_ready, sigkill};
use serde_json::json;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::fakes::first_then;
use switchboard_testing::{
    TestApp, TestDb, eventually, outbox_of, random_prefix, seed_item, seed_member,
};
use wiremock::{MockServer, ResponseTemplate};

/// kill -9 of the pod whose provider call is in flight (the provider never answered it):
/// the other pod delivers the reply, and the customer gets it once.
#[tokio::test]
async fn outbound_a_pod_killed_mid_send_is_delivered_by_the_other_pod_once() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    // The first call is never answered (in flight when the pod dies); later calls are.
    let slack = MockServer::start().await;
    let ok = |ts: &str| json!({"ok": true, "channel": "C1", "ts": ts});
    first_then(
        &slack,
        "/chat.postMessage",
        ResponseTemplate::new(200)
            .set_delay(Duration::from_secs(60))
            .set_body_json(ok("1.000001")),
        ResponseTemplate::new(200).set_body_json(ok("2.000002")),
    )
    .await;

    let mut vars = process_env(&db, &prefix);
    vars.insert("SLACK_API_BASE".into(), slack.uri());
    vars.insert("OUTBOUND_TIMEOUT_MS".into(), "120000".into());
    // Pod A never sweeps within this test, so recovery is pod B's doing; its lease on the
    // row outlives it by 2 s only.
    vars.insert("OUTBOX_SWEEP_INTERVAL_MS".into(), "3600000".into());
    vars.insert("OUTBOX_LEASE_SECS".into(), "2".into());
    let (mut child, a) = serve_ready(&vars).await;

    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = a.login(&email, &password).await;
    let admin = a.as_user(&token);
    let conn = admin.create_connection(org, "slack").await;
    let reply_to = json!({"channel": "C1", "thread_ts": "1.5"});
    let item = seed_item(&db, org, "slack", conn, reply_to).await;
    let (status, released) = admin.act(item, "release", json!({})).await;
    assert!((200..300).contains(&status), "{status}");
    let outbox = outbox_of(&released);

    // Wait until pod A's call is at the provider, then kill -9.
    let called = || async {
        let requests = slack.received_requests().await.unwrap();
        (!requests.is_empty()).then_some(())
    };
    eventually(
        "the reply reaches the provider",
        Duration::from_secs(20),
        called,
    )
    .await;
    sigkill(&mut child);
    let sent = format!("SELECT count(*) FROM outbox WHERE id = '{outbox}' AND status = 'sent'");
    assert_eq!(db.count(&sent).await, 0);

    // Pod B, same Postgres and Redis: its sweeper finds the row once A's lease lapsed.
    let app = TestApp::builder()
        .db(db)
        .prefix(&prefix)
        .env("SLACK_API_BASE", &slack.uri())
        .env("OUTBOX_GRACE_SECS", "1")
        .env("OUTBOX_SWEEP_INTERVAL_MS", "300")
        .build()
        .await;
    let db = &app.db;
    assert_eq!(db.wait_for_count(&sent, 1).await, 1, "pod B delivered it");
    // Two more sweeps after the delivery: nothing sends it again.
    db.wait_for_job_runs("outbox-sweeper", 2).await;
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
