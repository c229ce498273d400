//! F4: per-org sequence numbers (gap-free and race-free across pods), replay of missed
//! events through `GET /events`, retention, and what `/ready` and `/metrics` report.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_jobs::periodic::events_retention;
use switchboard_testing::rows::{agent_message_sent, message_created, queue_item_updated};
use switchboard_testing::socket::connect_with;
use switchboard_testing::{TestApp, TestDb};
use uuid::Uuid;

#[tokio::test]
async fn realtime_missed_events_are_replayed_in_order_after_a_reconnect() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let expert = app.member(None, Role::Expert).await;
    let (org, token) = (expert.org, expert.token.as_str());
    let replay =
        |query: String| async move { a.as_user(token).get(&format!("/events?{query}")).await };

    let mut sock = connect_with(a, token).await;
    b.emit(org, message_created(Uuid::new_v4()));
    let (_, first) = sock
        .next(Duration::from_secs(10))
        .await
        .expect("live event");
    assert_eq!(first["seq"], json!(1));
    sock.close().await;

    // Emitted while the client is away, from both pods.
    for i in 1..=6 {
        app.pod(i % 2)
            .emit(org, queue_item_updated(Uuid::new_v4(), i as i32));
    }
    let all = "SELECT count(*) FROM events";
    assert_eq!(db.wait_for_count(all, 7).await, 7);
    // Numbered is not yet published: wait until the relay has sent all seven, so what the
    // new socket receives live is only what comes after them.
    let published = "SELECT COALESCE(max(published_seq), 0) FROM org_event_seq";
    assert_eq!(db.wait_for_count(published, 7).await, 7);

    let mut sock = connect_with(b, token).await;
    let (status, page) = b
        .as_user(token)
        .get(&format!("/events?org_id={org}&after=1"))
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["latest_seq"], 7);
    assert_eq!(page["truncated"], false);
    let events = page["events"].as_array().unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(
        seqs,
        vec![2, 3, 4, 5, 6, 7],
        "in order, none missing: {page}"
    );
    for e in events {
        assert_eq!(e["event"], "queue_item_updated");
        assert_eq!(e["data"]["seq"], e["seq"], "the socket payload, as sent");
        assert_eq!(e["data"]["org_id"], json!(org));
    }
    let ids: Vec<&str> = events
        .iter()
        .map(|e| e["data"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 6);

    // Paging: after 3, two at a time.
    let (_, page) = replay(format!("org_id={org}&after=3&limit=2")).await;
    let seqs: Vec<&Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["seq"])
        .collect();
    assert_eq!(seqs, vec![&json!(4), &json!(5)]);
    let (status, _) = replay(format!("org_id={org}&after=0&limit=0")).await;
    assert_eq!(status, 422);
    let (status, _) = replay(format!("org_id={org}&after=-1")).await;
    assert_eq!(status, 422);

    // Live delivery continues from the next number.
    a.emit(org, agent_message_sent(Uuid::new_v4()));
    let (name, data) = sock
        .next(Duration::from_secs(10))
        .await
        .expect("live again");
    assert_eq!(
        (name.as_str(), data["seq"].clone()),
        ("agent_message_sent", json!(8))
    );
    sock.close().await;
}

#[tokio::test]
async fn realtime_seq_is_gap_free_across_pods_and_a_repeated_emit_keeps_its_number() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let org = app.member(None, Role::Expert).await.org;
    let other = app.member(None, Role::Expert).await.org;
    let from_a: Vec<_> = (0..40).map(|_| message_created(Uuid::new_v4())).collect();
    for event in &from_a {
        a.emit(org, event.clone());
        b.emit(org, message_created(Uuid::new_v4()));
        b.emit(other, message_created(Uuid::new_v4()));
    }
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM events", 120).await,
        120
    );
    let pool = db.pool().await;
    let (count, min, max): (i64, i64, i64) =
        sqlx::query_as("SELECT count(*), min(seq), max(seq) FROM events WHERE org_id = $1")
            .bind(org)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (count, min, max),
        (80, 1, 80),
        "one number per event, no gaps"
    );

    // A retried emit (same event, same payload) does not take a number; the next one does.
    b.emit(org, from_a[7].clone());
    b.emit(org, message_created(Uuid::new_v4()));
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM events", 121).await,
        121
    );
    let max: i64 = sqlx::query_scalar("SELECT max(seq) FROM events WHERE org_id = $1")
        .bind(org)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(max, 81);
    let counter: i64 = sqlx::query_scalar("SELECT seq FROM org_event_seq WHERE org_id = $1")
        .bind(org)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(counter, 81, "the duplicate gave its number back");
}

#[tokio::test]
async fn realtime_retention_deletes_old_events_and_replay_says_so() {
    let app = TestApp::builder().build().await;
    let (a, db) = (app.pod(0), &app.db);
    let expert = app.member(None, Role::Expert).await;
    let (org, token) = (expert.org, expert.token.as_str());
    for _ in 0..3 {
        a.emit(org, message_created(Uuid::new_v4()));
    }
    assert_eq!(db.wait_for_count("SELECT count(*) FROM events", 3).await, 3);
    let pool = db.pool().await;
    sqlx::query("UPDATE events SET created_at = now() - interval '3 days' WHERE seq <= 2")
        .execute(&pool)
        .await
        .unwrap();
    // The job's body (the scheduler's tests cover once per slot across pods).
    let retention = Duration::from_secs(24 * 3600);
    let run = events_retention::delete_expired(&pool, retention).await;
    assert_eq!(run.unwrap(), 2);
    let again = events_retention::delete_expired(&pool, retention).await;
    assert_eq!(again.unwrap(), 0, "nothing old is left");
    assert_eq!(db.count("SELECT count(*) FROM events").await, 1);

    let user = a.as_user(token);
    let (_, page) = user.get(&format!("/events?org_id={org}&after=0")).await;
    assert_eq!(page["truncated"], true, "{page}");
    assert_eq!(page["events"][0]["seq"], 3);
    let (_, page) = user.get(&format!("/events?org_id={org}&after=2")).await;
    assert_eq!(page["truncated"], false, "{page}");
}

#[tokio::test]
async fn realtime_ready_and_metrics_report_the_adapter_and_sockets() {
    let app = TestApp::builder().build().await;
    let a = app.pod(0);
    let expert = app.member(None, Role::Expert).await;
    let mut sock = connect_with(a, &expert.token).await;
    a.emit(expert.org, message_created(Uuid::new_v4()));
    assert!(sock.next(Duration::from_secs(10)).await.is_some());

    let health = a.server.state().realtime.check_subscriptions().await;
    assert!(health.ok, "{health:?}");
    assert_eq!(
        health.expected, 3,
        "request, pod request and pod response channels"
    );
    let (_, ready) = a.ready().await;
    assert_eq!(ready["realtime"]["adapter"]["ok"], true, "{ready}");
    assert_eq!(ready["realtime"]["sockets"], 1, "{ready}");

    let metrics = a.metrics().await;
    for name in [
        "realtime_connected_sockets",
        "realtime_emits_total",
        "realtime_adapter_up",
        "realtime_adapter_subscriptions",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    sock.close().await;
}

#[tokio::test]
async fn realtime_a_batch_numbers_new_events_in_order_and_repeats_keep_their_number() {
    use switchboard_realtime::events::{append, append_batch};
    let db = TestDb::fresh().await;
    let pool = db.pool().await;
    let org = switchboard_store::orgs::create(&pool, "Batch")
        .await
        .unwrap()
        .id;
    let (a, b, c) = (json!({"n": 1}), json!({"n": 2}), json!({"n": 3}));
    // A fresh org: the batch takes 1 and 2, the repeat inside it takes none.
    let first = append_batch(
        &pool,
        org,
        &[
            ("message_created", &a),
            ("message_created", &b),
            ("message_created", &a),
        ],
    )
    .await
    .unwrap();
    let seqs: Vec<(i64, bool)> = first.iter().map(|x| (x.seq, x.fresh)).collect();
    assert_eq!(seqs, [(1, true), (2, true), (1, false)]);
    // Stored repeats keep their numbers; the new one continues the sequence.
    let second = append_batch(
        &pool,
        org,
        &[("message_created", &b), ("message_created", &c)],
    )
    .await
    .unwrap();
    let seqs: Vec<(i64, bool)> = second.iter().map(|x| (x.seq, x.fresh)).collect();
    assert_eq!(seqs, [(2, false), (3, true)]);
    // Only repeats: nothing consumed.
    append_batch(&pool, org, &[("message_created", &c)])
        .await
        .unwrap();
    assert_eq!(
        append(&pool, org, "queue_item_created", &a)
            .await
            .unwrap()
            .seq,
        4
    );
    let stored: Vec<i64> =
        sqlx::query_scalar("SELECT seq FROM events WHERE org_id = $1 ORDER BY seq")
            .bind(org)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(stored, [1, 2, 3, 4]);
}
