//! F4 resilience: the adapter's pub/sub connection killed, Redis restarted, and a pod shut
//! down. Every test here owns its Redis server.

use crate::realtime_support::{Sock, connect_with, emit, org_expert};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use switchboard_testing::{RedisServer, TestDb, TestPod, random_prefix};
use uuid::Uuid;

fn fast_watchdog(vars: &mut HashMap<String, String>) {
    vars.insert("REALTIME_WATCHDOG_MS".into(), "300".into());
}

/// Emits a probe from `from` every half second until `sock` receives one (up to 30 s).
async fn crosses(from: &TestPod, sock: &mut Sock, org: Uuid, tag: &str) -> bool {
    for i in 0..60 {
        emit(
            from,
            org,
            "message_created",
            json!({"probe": format!("{tag}-{i}")}),
        );
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        while let Some(left) = deadline.checked_duration_since(tokio::time::Instant::now()) {
            match sock.next(left).await {
                Some((_, data)) if data["probe"].as_str().is_some_and(|p| p.starts_with(tag)) => {
                    return true;
                }
                Some(_) => {}
                None => break,
            }
        }
    }
    false
}

/// Emits `n` events from `from` and checks `sock` gets every one of them.
async fn all_arrive(from: &TestPod, sock: &mut Sock, org: Uuid, tag: &str, n: usize) {
    for i in 0..n {
        emit(
            from,
            org,
            "queue_item_updated",
            json!({"id": format!("{tag}-{i}")}),
        );
    }
    let mut missing: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !missing.is_empty() {
        let Some(left) = deadline.checked_duration_since(tokio::time::Instant::now()) else {
            break;
        };
        let Some((_, data)) = sock.next(left).await else {
            break;
        };
        missing.retain(|id| data["id"].as_str() != Some(id.as_str()));
    }
    assert!(missing.is_empty(), "{tag}: never arrived: {missing:?}");
}

#[tokio::test]
async fn realtime_delivery_recovers_after_pubsub_kill_and_redis_restart() {
    let db = TestDb::fresh().await;
    let mut redis = RedisServer::start().await;
    let prefix = random_prefix();
    let a = TestPod::start_with(&db, &redis.url(), &prefix, fast_watchdog).await;
    let b = TestPod::start_with(&db, &redis.url(), &prefix, fast_watchdog).await;
    let (org, token) = org_expert(&db, &a).await;
    let mut on_a = connect_with(&a, &token).await;
    all_arrive(&b, &mut on_a, org, "before", 5).await;

    // The adapters' subscribed connections are killed.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        killed >= 2,
        "both pods' pub/sub connections were killed ({killed})"
    );
    all_arrive(&a, &mut on_a, org, "local-after-kill", 3).await;
    assert!(
        crosses(&b, &mut on_a, org, "after-kill").await,
        "cross-pod after kill"
    );
    all_arrive(&b, &mut on_a, org, "steady-after-kill", 10).await;

    // Redis goes away: this pod's own sockets are still served.
    redis.stop();
    all_arrive(&a, &mut on_a, org, "local-while-down", 3).await;
    let down = a.server.state().realtime.check_subscriptions().await;
    assert!(!down.ok, "the watchdog reports the outage: {down:?}");

    // Redis comes back empty: subscriptions are re-made and cross-pod delivery resumes.
    redis.restart().await;
    assert!(
        crosses(&b, &mut on_a, org, "after-restart").await,
        "cross-pod after restart"
    );
    all_arrive(&b, &mut on_a, org, "steady-after-restart", 10).await;
    all_arrive(&a, &mut on_a, org, "local-after-restart", 3).await;
    let mut healthy = false;
    for _ in 0..50 {
        healthy = a.server.state().realtime.check_subscriptions().await.ok;
        if healthy {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(healthy, "the watchdog sees the subscriptions again");
    on_a.close().await;
}

#[tokio::test]
async fn realtime_pod_started_while_redis_was_down_subscribes_once_it_returns() {
    let db = TestDb::fresh().await;
    let mut redis = RedisServer::start().await;
    let prefix = random_prefix();
    redis.stop();
    // Nothing to subscribe to: the adapter starts anyway and the watchdog says why.
    let a = TestPod::start_with(&db, &redis.url(), &prefix, fast_watchdog).await;
    let down = a.server.state().realtime.check_subscriptions().await;
    assert!(!down.ok && down.expected == 3, "{down:?}");

    redis.restart().await;
    let b = TestPod::start_with(&db, &redis.url(), &prefix, fast_watchdog).await;
    let mut health = down;
    for _ in 0..100 {
        health = a.server.state().realtime.health();
        if health.ok {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        health.ok && health.subscribed == 3,
        "the watchdog subscribed: {health:?}"
    );
    let (org, token) = org_expert(&db, &a).await;
    let mut on_a = connect_with(&a, &token).await;
    all_arrive(&b, &mut on_a, org, "from-b", 10).await;
    on_a.close().await;
}

#[tokio::test]
async fn realtime_sockets_are_closed_after_the_drain_delay_and_late_emits_still_cross() {
    let db = TestDb::fresh().await;
    let redis = RedisServer::start().await;
    let prefix = random_prefix();
    let a = TestPod::start_with(&db, &redis.url(), &prefix, |v| {
        v.insert("DRAIN_DELAY_MS".into(), "300".into());
    })
    .await;
    let b = TestPod::start_with(&db, &redis.url(), &prefix, |_| {}).await;
    let (org, token) = org_expert(&db, &a).await;
    let on_a = connect_with(&a, &token).await;
    let mut on_b = connect_with(&b, &token).await;
    let realtime = a.server.state().realtime.clone();
    assert_eq!(realtime.local_sockets(), 1);
    a.server.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        realtime.local_sockets(),
        1,
        "still served during the drain delay"
    );
    let mut closed = false;
    for _ in 0..100 {
        if realtime.local_sockets() == 0 {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(closed, "sockets closed once the drain delay is over");

    // A job finishing on the draining pod still reaches the clients of the other pods.
    assert!(crosses(&a, &mut on_b, org, "late-probe").await);
    all_arrive(&a, &mut on_b, org, "late", 3).await;
    on_a.close().await;
    on_b.close().await;
}
