//! Redis lost under the inbound flow: flushed after it acknowledged jobs, its connections
//! killed, or down while webhooks arrive. Postgres holds every accepted event, so nothing
//! is lost and nothing is doubled. Every test here owns its Redis server.

use serde_json::json;
use std::time::Duration;
use switchboard_testing::fakes::agent_answering;
use switchboard_testing::signing::{TELEGRAM_SECRET, telegram};
use switchboard_testing::{RedisServer, TestApp};
use wiremock::ResponseTemplate;

/// A pod with the fake agent on `redis`, and its org's Telegram webhook path.
async fn on(redis: &RedisServer) -> (TestApp, String) {
    let app = TestApp::builder()
        .redis(&redis.url())
        .fake_agent()
        .build()
        .await;
    let path = app.org().await.webhook("telegram");
    (app, path)
}

#[tokio::test]
async fn redis_flushed_after_50_acks_loses_nothing() {
    let redis = RedisServer::start().await;
    // A slow agent keeps most jobs waiting in Redis when it is flushed.
    let agent = agent_answering(
        ResponseTemplate::new(200)
            .set_delay(Duration::from_millis(300))
            .set_body_json(json!({"reply": "ok", "confidence": 0.5, "cost_usd": 0.0})),
    )
    .await;
    let app = TestApp::builder()
        .redis(&redis.url())
        .agent(agent)
        .build()
        .await;
    let (a, db) = (app.pod(0), &app.db);
    let path = app.org().await.webhook("telegram");
    for i in 0..50 {
        let update = telegram(TELEGRAM_SECRET, 1000 + i, 100 + i, "help");
        let (status, body) = a.send_webhook(&path, &update).await;
        assert_eq!(status, 200, "{body}");
    }
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();

    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM drafts", 50).await,
        50
    );
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 50);
    assert_eq!(
        db.count("SELECT count(*) FROM inbound_events WHERE processed_at IS NULL")
            .await,
        0
    );
    let requeued = db.count("SELECT coalesce(sum((detail->>'pushed')::int), 0) FROM cron_runs WHERE job = 'inbox-sweeper'").await;
    assert!(requeued > 0, "the sweeper re-enqueued what the flush lost");
}

#[tokio::test]
async fn workers_recover_after_their_redis_connections_are_killed() {
    let redis = RedisServer::start().await;
    let (app, path) = on(&redis).await;
    let (p, db) = (app.pod(0), &app.db);
    let before = telegram(TELEGRAM_SECRET, 1, 1, "before");
    assert_eq!(p.send_webhook(&path, &before).await.0, 200);
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 1).await, 1);

    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let me: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut conn)
        .await
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        killed > 0,
        "the pod's connections were killed (we are client {me})"
    );

    for i in 2..12 {
        let after = telegram(TELEGRAM_SECRET, i, i, "after");
        let (status, body) = p.send_webhook(&path, &after).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM drafts", 11).await,
        11
    );
}

#[tokio::test]
async fn webhooks_are_acknowledged_while_redis_is_down_and_processed_after() {
    let mut redis = RedisServer::start().await;
    let (app, path) = on(&redis).await;
    let (p, db) = (app.pod(0), &app.db);

    redis.stop();
    for i in 0..3 {
        let update = telegram(TELEGRAM_SECRET, 50 + i, 7, "redis is down");
        let (status, body) = p.send_webhook(&path, &update).await;
        assert_eq!(status, 200, "{body}");
    }
    // The same update again while Redis is down: Postgres alone still deduplicates.
    let again = telegram(TELEGRAM_SECRET, 50, 7, "redis is down");
    let (status, body) = p.send_webhook(&path, &again).await;
    assert_eq!((status, body.contains("duplicate")), (200, true), "{body}");
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, 3);

    redis.restart().await;
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 3).await, 3);
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 3);
}
