//! F4 resilience: the adapter's pub/sub connection killed, Redis restarted, and a pod shut
//! down. Every test here owns its Redis server.

use std::collections::HashSet;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::rows::{message_created, queue_item_updated};
use switchboard_testing::socket::{Sock, connect_with};
use switchboard_testing::{RedisServer, TestApp, TestPod, try_eventually};
use uuid::Uuid;

/// Emits a probe from `from` every half second until `sock` receives one (up to 30 s).
async fn crosses(from: &TestPod, sock: &mut Sock, org: Uuid) -> bool {
    let mut probes = HashSet::new();
    for _ in 0..60 {
        let probe = Uuid::new_v4();
        probes.insert(probe.to_string());
        from.emit(org, message_created(probe));
        let arrived = sock
            .next_matching(Duration::from_millis(500), |_, data| {
                data["message_id"]
                    .as_str()
                    .is_some_and(|id| probes.contains(id))
            })
            .await;
        if arrived.is_some() {
            return true;
        }
    }
    false
}

/// Emits `n` events from `from` and checks `sock` gets every one of them.
async fn all_arrive(from: &TestPod, sock: &mut Sock, org: Uuid, tag: &str, n: usize) {
    let mut missing: HashSet<String> = HashSet::new();
    for _ in 0..n {
        let id = Uuid::new_v4();
        missing.insert(id.to_string());
        from.emit(org, queue_item_updated(id, 1));
    }
    sock.next_matching(Duration::from_secs(30), |_, data| {
        if let Some(id) = data["id"].as_str() {
            missing.remove(id);
        }
        missing.is_empty()
    })
    .await;
    assert!(missing.is_empty(), "{tag}: never arrived: {missing:?}");
}

/// Two pods on `redis` whose watchdogs look every 300 ms, and an expert connected to pod A.
async fn watched(redis: &RedisServer) -> (TestApp, Uuid, Sock) {
    let app = TestApp::builder()
        .pods(2)
        .redis(&redis.url())
        .env("REALTIME_WATCHDOG_MS", "300")
        .build()
        .await;
    let expert = app.member(None, Role::Expert).await;
    let sock = connect_with(app.pod(0), &expert.token).await;
    (app, expert.org, sock)
}

#[tokio::test]
async fn realtime_delivery_recovers_after_pubsub_kill_and_redis_restart() {
    let mut redis = RedisServer::start().await;
    let (app, org, mut on_a) = watched(&redis).await;
    let (a, b) = (app.pod(0), app.pod(1));
    all_arrive(b, &mut on_a, org, "before", 5).await;

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
    all_arrive(a, &mut on_a, org, "local-after-kill", 3).await;
    assert!(crosses(b, &mut on_a, org).await, "cross-pod after kill");
    all_arrive(b, &mut on_a, org, "steady-after-kill", 10).await;

    // Redis goes away: this pod's own sockets are still served.
    redis.stop();
    all_arrive(a, &mut on_a, org, "local-while-down", 3).await;
    let down = a.server.state().realtime.check_subscriptions().await;
    assert!(!down.ok, "the watchdog reports the outage: {down:?}");

    // Redis comes back empty: subscriptions are re-made and cross-pod delivery resumes.
    redis.restart().await;
    assert!(crosses(b, &mut on_a, org).await, "cross-pod after restart");
    all_arrive(b, &mut on_a, org, "steady-after-restart", 10).await;
    all_arrive(a, &mut on_a, org, "local-after-restart", 3).await;
    let healthy = || async {
        let health = a.server.state().realtime.check_subscriptions().await;
        health.ok.then_some(())
    };
    assert!(
        try_eventually(Duration::from_secs(5), healthy)
            .await
            .is_some(),
        "the watchdog sees the subscriptions again"
    );
    on_a.close().await;
}

#[tokio::test]
async fn realtime_pod_started_while_redis_was_down_subscribes_once_it_returns() {
    let mut redis = RedisServer::start().await;
    redis.stop();
    // Nothing to subscribe to: the adapter starts anyway and the watchdog says why.
    let mut app = TestApp::builder()
        .redis(&redis.url())
        .env("REALTIME_WATCHDOG_MS", "300")
        .build()
        .await;
    let down = app
        .pod(0)
        .server
        .state()
        .realtime
        .check_subscriptions()
        .await;
    assert!(!down.ok && down.expected == 3, "{down:?}");

    redis.restart().await;
    app.start_pod(&[]).await;
    let (a, b) = (app.pod(0), app.pod(1));
    let subscribed = || async {
        let health = a.server.state().realtime.health();
        (health.ok && health.subscribed == 3).then_some(())
    };
    let health = try_eventually(Duration::from_secs(10), subscribed).await;
    assert!(
        health.is_some(),
        "the watchdog subscribed: {:?}",
        a.server.state().realtime.health()
    );
    let expert = app.member(None, Role::Expert).await;
    let mut on_a = connect_with(a, &expert.token).await;
    all_arrive(b, &mut on_a, expert.org, "from-b", 10).await;
    on_a.close().await;
}

#[tokio::test]
async fn realtime_sockets_are_closed_after_the_drain_delay_and_late_emits_still_cross() {
    let redis = RedisServer::start().await;
    let app = TestApp::builder()
        .pods(2)
        .redis(&redis.url())
        .pod_env(0, "DRAIN_DELAY_MS", "300")
        .build()
        .await;
    let (a, b) = (app.pod(0), app.pod(1));
    let expert = app.member(None, Role::Expert).await;
    let (org, token) = (expert.org, &expert.token);
    let on_a = connect_with(a, token).await;
    let mut on_b = connect_with(b, token).await;
    assert_eq!(a.local_sockets(), 1);
    a.server.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(a.local_sockets(), 1, "still served during the drain delay");
    assert!(
        a.sockets_become(0, Duration::from_secs(10)).await,
        "sockets closed once the drain delay is over"
    );

    // A job finishing on the draining pod still reaches the clients of the other pods.
    assert!(crosses(a, &mut on_b, org).await);
    all_arrive(a, &mut on_b, org, "late", 3).await;
    on_a.close().await;
    on_b.close().await;
}
