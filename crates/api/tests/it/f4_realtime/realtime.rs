//! F4: Socket.IO through the Redis adapter — cross-pod delivery of the inbound flow's events,
//! the JWT handshake, websocket-only transport and org isolation.

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::rows::{message_created, queue_item_updated};
use switchboard_testing::signing::{SLACK_SECRET, slack};
use switchboard_testing::socket::{connect, connect_with};
use switchboard_testing::{JWT_SECRET, TestApp, TestPod};
use uuid::Uuid;

#[tokio::test]
async fn realtime_client_on_pod_a_receives_events_of_a_webhook_processed_by_pod_b() {
    // A runs no workers, so every job is B's.
    let app = TestApp::builder()
        .pods(2)
        .fake_agent()
        .pod_env(0, "WORKER_CONCURRENCY", "0")
        .build()
        .await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let org = app.org_via(1).await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let mut sock = connect_with(a, &expert.token).await;

    let path = org.webhook("slack");
    for i in 1..=3 {
        let signed = slack(
            SLACK_SECRET,
            &format!("EvRt{i}"),
            &format!("U{i}"),
            &format!("1700000100.{i:06}"),
            "where is my order?",
        );
        assert_eq!(b.send_webhook(&path, &signed).await.0, 200);
    }
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM expert_queue", 3)
            .await,
        3
    );

    // Each webhook: message_created then queue_item_created, numbered 1..=6 without gaps.
    let got = sock.take(6).await;
    assert_eq!(got.len(), 6, "all events arrive on pod A: {got:?}");
    let seqs: BTreeSet<i64> = got
        .iter()
        .map(|(_, d)| d["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=6).collect(), "{got:?}");
    for (name, data) in &got {
        assert_eq!(data["org_id"], json!(org.id), "{name}: {data}");
    }
    let pool = db.pool().await;
    let items: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT q.id, e.seq FROM expert_queue q
         JOIN events e ON e.event = 'queue_item_created' AND e.payload->>'id' = q.id::text",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(items.len(), 3);
    for (item_id, stored_seq) in items {
        let (_, created) = got
            .iter()
            .find(|(name, d)| name == "queue_item_created" && d["id"] == json!(item_id))
            .expect("queue_item_created for each item");
        assert_eq!(
            created["seq"],
            json!(stored_seq),
            "the seq on the wire is the stored one"
        );
        assert_eq!(created["version"], 1);
    }
    let messages = got.iter().filter(|(name, _)| name == "message_created");
    assert_eq!(messages.count(), 3);
    assert_eq!(
        b.local_sockets() + a.local_sockets(),
        1,
        "the one client is on A"
    );
    sock.close().await;
}

#[tokio::test]
async fn realtime_handshake_refuses_missing_invalid_and_expired_tokens() {
    let app = TestApp::builder().build().await;
    let a = app.pod(0);
    let admin = app.member(None, Role::Admin).await;
    let token = admin.token;

    let missing = connect(a, None)
        .await
        .err()
        .expect("refused without auth")
        .to_string();
    assert!(missing.contains("authentication required"), "{missing}");
    let empty = connect(a, Some(json!({})))
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(empty.contains("authentication required"), "{empty}");
    let invalid = connect(a, Some(json!({"token": "not-a-jwt"}))).await.err();
    assert!(
        invalid
            .expect("refused")
            .to_string()
            .contains("invalid token")
    );
    let forged = format!("{}x", &token[..token.len() - 1]);
    let forged = connect(a, Some(json!({"token": forged}))).await.err();
    assert!(
        forged
            .expect("refused")
            .to_string()
            .contains("invalid token")
    );

    let now = chrono::Utc::now().timestamp();
    let expired = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"sub": admin.id, "iat": now - 7200, "exp": now - 60}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();
    let expired = connect(a, Some(json!({"token": expired}))).await.err();
    assert!(
        expired
            .expect("refused")
            .to_string()
            .contains("token expired")
    );

    // The same user with a valid token is admitted.
    connect_with(a, &token).await.close().await;
}

#[tokio::test]
async fn realtime_polling_transport_is_refused() {
    let (a, _db) = TestPod::single().await;
    for query in ["EIO=4&transport=polling", "EIO=3&transport=polling"] {
        let r = a.get(&format!("/socket.io/?{query}")).await;
        assert_eq!(r.status(), 400, "{query}");
        let body = r.text().await.unwrap();
        assert!(!body.contains("\"sid\""), "no session was opened: {body}");
    }
}

#[tokio::test]
async fn realtime_client_of_one_org_receives_nothing_of_another() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let one = app.member(None, Role::Expert).await;
    let two = app.member(None, Role::Expert).await;
    let mut sock_1 = connect_with(a, &one.token).await;
    let mut sock_2 = connect_with(b, &two.token).await;

    // Org 2's events, from both pods; org 1 gets one marker event after them.
    for _ in 0..3 {
        a.emit(two.org, message_created(Uuid::new_v4()));
        b.emit(two.org, queue_item_updated(Uuid::new_v4(), 1));
    }
    let seen = sock_2.take(6).await;
    assert_eq!(seen.len(), 6, "org 2 gets its events: {seen:?}");
    assert!(seen.iter().all(|(_, d)| d["org_id"] == json!(two.org)));
    let marker = Uuid::new_v4();
    b.emit(one.org, message_created(marker));
    let (name, data) = sock_1.next(Duration::from_secs(10)).await.expect("marker");
    assert_eq!(
        (name.as_str(), &data["message_id"]),
        ("message_created", &json!(marker))
    );
    assert_eq!(data["seq"], json!(1), "org 1 numbers its own events");
    // Org 2's events were all delivered before the marker was sent: a leaked one would
    // have come first, or be waiting now.
    assert_eq!(sock_1.next(Duration::ZERO).await, None::<(String, Value)>);

    // Nor through the replay endpoint.
    let events = format!("/events?org_id={}&after=0", two.org);
    let (status, body) = a.as_user(&one.token).get(&events).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    sock_1.close().await;
    sock_2.close().await;
}
