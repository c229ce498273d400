//! F4: Socket.IO through the Redis adapter — cross-pod delivery of the inbound flow's events,
//! the JWT handshake, websocket-only transport and org isolation.

use crate::inbound_support::{agent, connections, pod, send, wait_for_count};
use crate::realtime_support::{connect, connect_with, emit, fetch_events, org_expert};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::{JWT_SECRET, TestDb, TestPod, random_prefix, redis_url, seed_member};

#[tokio::test]
async fn realtime_client_on_pod_a_receives_events_of_a_webhook_processed_by_pod_b() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let prefix = random_prefix();
    // A runs no workers (WORKER_CONCURRENCY=0), so every job is B's.
    let a = TestPod::start_with(&db, &redis_url(), &prefix, |v| {
        v.insert("WORKER_CONCURRENCY".into(), "0".into());
    })
    .await;
    let b = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let (org, conns) = connections(&db, &b).await;
    let (_, email, password) = seed_member(&db, Some(org), Role::Expert).await;
    let mut sock = connect_with(&a, &a.login(&email, &password).await).await;

    let path = format!("/webhooks/slack/{}", conns[0].1);
    for i in 1..=3 {
        let signed = switchboard_testing::signing::slack(
            "slack-signing-secret",
            &format!("EvRt{i}"),
            &format!("U{i}"),
            &format!("1700000100.{i:06}"),
            "where is my order?",
        );
        assert_eq!(send(&b, &path, &signed).await.0, 200);
    }
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM expert_queue", 3).await,
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
        assert_eq!(data["org_id"], json!(org), "{name}: {data}");
    }
    let pool = db.pool().await;
    let items: Vec<(uuid::Uuid, i64)> = sqlx::query_as(
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
        b.server.state().realtime.local_sockets() + a.server.state().realtime.local_sockets(),
        1,
        "the one client is on A"
    );
    sock.close().await;
}

#[tokio::test]
async fn realtime_handshake_refuses_missing_invalid_and_expired_tokens() {
    let (a, db) = TestPod::single().await;
    let (_, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = a.login(&email, &password).await;

    let missing = connect(&a, None).await.err().expect("refused without auth");
    assert!(missing.contains("authentication required"), "{missing}");
    let empty = connect(&a, Some(json!({}))).await.err().expect("refused");
    assert!(empty.contains("authentication required"), "{empty}");
    let invalid = connect(&a, Some(json!({"token": "not-a-jwt"}))).await.err();
    assert!(invalid.expect("refused").contains("invalid token"));
    let forged = format!("{}x", &token[..token.len() - 1]);
    let forged = connect(&a, Some(json!({"token": forged}))).await.err();
    assert!(forged.expect("refused").contains("invalid token"));

    let pool = db.pool().await;
    let user: uuid::Uuid = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_one(&pool)
        .await
        .unwrap();
    let now = chrono::Utc::now().timestamp();
    let expired = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"sub": user, "iat": now - 7200, "exp": now - 60}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();
    let expired = connect(&a, Some(json!({"token": expired}))).await.err();
    assert!(expired.expect("refused").contains("token expired"));

    // The same user with a valid token is admitted.
    connect_with(&a, &token).await.close().await;
}

#[tokio::test]
async fn realtime_polling_transport_is_refused() {
    let (a, _db) = TestPod::single().await;
    for query in ["EIO=4&transport=polling", "EIO=3&transport=polling"] {
        let r = a
            .client
            .get(a.url(&format!("/socket.io/?{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{query}");
        let body = r.text().await.unwrap();
        assert!(!body.contains("\"sid\""), "no session was opened: {body}");
    }
}

#[tokio::test]
async fn realtime_client_of_one_org_receives_nothing_of_another() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let a = TestPod::start(&db, &prefix).await;
    let b = TestPod::start(&db, &prefix).await;
    let (org_1, token_1) = org_expert(&db, &a).await;
    let (org_2, token_2) = org_expert(&db, &a).await;
    let mut sock_1 = connect_with(&a, &token_1).await;
    let mut sock_2 = connect_with(&b, &token_2).await;

    // Org 2's events, from both pods; org 1 gets one marker event after them.
    for i in 0..3 {
        emit(
            &a,
            org_2,
            "message_created",
            json!({"message_id": format!("m2-{i}")}),
        );
        emit(
            &b,
            org_2,
            "queue_item_updated",
            json!({"id": format!("q2-{i}")}),
        );
    }
    let seen = sock_2.take(6).await;
    assert_eq!(seen.len(), 6, "org 2 gets its events: {seen:?}");
    assert!(seen.iter().all(|(_, d)| d["org_id"] == json!(org_2)));
    emit(
        &b,
        org_1,
        "message_created",
        json!({"message_id": "marker"}),
    );
    let (name, data) = sock_1.next(Duration::from_secs(10)).await.expect("marker");
    assert_eq!(
        (name.as_str(), &data["message_id"]),
        ("message_created", &json!("marker"))
    );
    assert_eq!(data["seq"], json!(1), "org 1 numbers its own events");
    assert_eq!(
        sock_1.next(Duration::from_secs(1)).await,
        None::<(String, Value)>
    );

    // Nor through the replay endpoint.
    let (status, body) = fetch_events(&a, &token_1, &format!("org_id={org_2}&after=0")).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    sock_1.close().await;
    sock_2.close().await;
}
