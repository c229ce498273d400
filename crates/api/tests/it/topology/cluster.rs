//! Redis Cluster: every script and pipeline the pod runs works when its keys' slots are
//! spread over several masters, and two pods on a cluster take webhooks, share realtime
//! events and send a released reply once. A cluster of the test's own (three masters) is
//! used, so this runs in every topology.

use serde_json::json;
use std::time::Duration;
use switchboard_config::{RedisEndpoint, RedisShape, RedisTls};
use switchboard_coord::{Redis, dedup};
use switchboard_jobs::queue::{InboundQueue, OutboundQueue};
use switchboard_jobs::redis_check::RedisWork;
use switchboard_testing::signing::{SLACK_SECRET, slack};
use switchboard_testing::socket::connect_with;
use switchboard_testing::{
    Load, RedisCluster, TestApp, TestAppBuilder, random_prefix, rows::assert_each_event_once,
    try_eventually_every, wait_outbox,
};

fn on(cluster: &RedisCluster, prefix: &str) -> Redis {
    let endpoint = RedisEndpoint {
        urls: cluster.seeds().split(',').map(str::to_owned).collect(),
        shape: RedisShape::Cluster,
        tls: RedisTls::Off,
    };
    Redis::connect(&endpoint, prefix).expect("cluster handle")
}

/// Pods whose Redis is `cluster` (and the other test settings the shared test Redis gets).
fn on_cluster(cluster: &RedisCluster) -> TestAppBuilder {
    TestApp::builder().env("REDIS_CLUSTER_NODES", &cluster.seeds())
}

/// Pods A and B on `cluster` with the fake agent and providers; A runs no workers, so every
/// job is B's and every event A's sockets get crossed pods.
async fn two_pods_on(cluster: &RedisCluster) -> TestApp {
    on_cluster(cluster)
        .pods(2)
        .fakes()
        .pod_env(0, "WORKER_CONCURRENCY", "0")
        .build()
        .await
}

#[tokio::test]
async fn cluster_every_script_and_pipeline_runs_whatever_the_slots() {
    let cluster = RedisCluster::start(3, 0).await;
    // Each prefix puts the queues', breakers' and probes' hash tags in other slots; twelve
    // prefixes land them on every master.
    for _ in 0..12 {
        let redis = on(&cluster, &random_prefix());
        let queues = vec![
            InboundQueue::inbound(&redis).queue_ref(),
            OutboundQueue::outbound(&redis).queue_ref(),
        ];
        let outcome = RedisWork::new(redis.clone(), queues, None).check().await;
        assert!(outcome.failure.is_none(), "{:?}", outcome.failure);

        // A batch of dedup keys spans slots: claimed, confirmed, seen, released.
        let scopes: Vec<String> = (0..40).map(|i| format!("conn:{i}")).collect();
        let seen = dedup::claim_many(&redis, &scopes).await.expect("claim");
        assert!(seen.iter().all(|s| *s == dedup::Seen::New), "{seen:?}");
        dedup::confirm_many(&redis, &scopes).await.expect("confirm");
        let again = dedup::claim_many(&redis, &scopes)
            .await
            .expect("claim again");
        assert!(again.iter().all(|s| *s == dedup::Seen::Done), "{again:?}");
        dedup::release_many(&redis, &scopes).await.expect("release");
        let fresh = dedup::claim_many(&redis, &scopes)
            .await
            .expect("claim fresh");
        assert!(fresh.iter().all(|s| *s == dedup::Seen::New), "{fresh:?}");
    }
}

#[tokio::test]
async fn cluster_pub_sub_is_sharded_and_follows_a_failover() {
    let mut cluster = RedisCluster::start(3, 1).await;
    let redis = on(&cluster, &random_prefix());
    let channel = redis.key("cluster-test:pushed");
    let mut listener = super::Listener::start(&redis, &channel).await;
    // SPUBLISH counts the node's sharded subscribers: this one.
    assert_eq!(redis.publish(&channel, "hello").await.expect("publish"), 1);
    listener.hears("hello").await;

    // The channel's master dies: the loop reports the loss, subscribes on the promoted
    // master, and hears what is published there.
    cluster.kill(cluster.master_of(&channel)).await;
    let (resubscribed, notices) =
        super::until_subscribed(&mut listener.rx, Duration::from_secs(30)).await;
    assert!(resubscribed, "{notices:?}");
    assert!(notices.iter().any(|n| n == "Lost"), "{notices:?}");
    assert_eq!(redis.publish(&channel, "again").await.expect("publish"), 1);
    listener.hears("again").await;
    listener.stop().await;
}

#[tokio::test]
async fn cluster_two_pods_take_webhooks_share_events_and_send_a_release_once() {
    let cluster = RedisCluster::start(3, 0).await;
    let app = two_pods_on(&cluster).await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    for p in [a, b] {
        let ready = p
            .ready_until(Duration::from_secs(10), |r| r["status"] == "ready")
            .await;
        assert_eq!(ready["status"], "ready", "{ready}");
        assert_eq!(ready["checks"]["redis_work"]["ok"], true, "{ready}");
    }
    let org = app.org_via(1).await;
    let mut sock = connect_with(a, &org.token).await;

    let signed = slack(
        SLACK_SECRET,
        "EvCluster1",
        "U1",
        "1700000100.000001",
        "where is my order?",
    );
    assert_eq!(b.send_webhook(&org.webhook("slack"), &signed).await.0, 200);
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM expert_queue", 1)
            .await,
        1
    );
    let got = sock.take(2).await;
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["message_created", "queue_item_created"], "{got:?}");
    let item: uuid::Uuid = got[1].1["id"].as_str().expect("id").parse().expect("uuid");

    let outbox = a.as_user(&org.token).release_ok(item, None).await;
    let sent = wait_outbox(db, outbox, "sent").await;
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
    // Two more sweeps after the send: nothing sends it again.
    db.wait_for_job_runs("outbox-sweeper", 2).await;
    assert_eq!(app.provider().calls("slack").len(), 1, "one provider call");
    assert_eq!(
        json!(
            db.count("SELECT count(*) FROM messages WHERE direction = 'outbound'")
                .await
        ),
        json!(1)
    );
    sock.close().await;
}

#[tokio::test]
async fn cluster_nodes_that_are_no_cluster_fail_readiness_with_the_step_named() {
    // A standalone Redis given as a cluster seed: the cluster client refuses it, the pod
    // starts, and /ready says which part of the work fails instead of workers looping.
    let standalone = switchboard_testing::RedisServer::start().await;
    let app = TestApp::builder()
        .env("REDIS_CLUSTER_NODES", &standalone.url())
        .build()
        .await;
    let pod = app.pod(0);
    let ready = || async {
        let (status, ready) = pod.ready().await;
        assert_eq!(status, 503);
        ready
    };
    let named = |r: &serde_json::Value| r["checks"]["redis_work"]["error"] == "failed at: limiter";
    let ready = switchboard_testing::settled(Duration::from_secs(5), ready, named).await;
    assert_eq!(ready["checks"]["redis"]["ok"], false, "{ready}");
    assert_eq!(
        ready["checks"]["redis_work"]["error"], "failed at: limiter",
        "{ready}"
    );
}

#[tokio::test]
async fn cluster_master_failover_under_load_loses_and_doubles_nothing() {
    let mut cluster = RedisCluster::start(3, 1).await;
    let app = on_cluster(&cluster)
        .pods(2)
        .fake_agent()
        // What the lost master had not replicated is re-enqueued from the inbox quickly.
        .env("INBOX_GRACE_SECS", "1")
        .env("INBOX_SWEEP_INTERVAL_MS", "500")
        .build()
        .await;
    let path = app.org().await.webhook("slack");

    // About 100 webhooks a second, alternating pods; each retried until answered 200, as a
    // provider does.
    let bases = app.pods.iter().map(|p| p.base.clone()).collect();
    let load = Load::start(bases, move |n| {
        let signed = slack(
            SLACK_SECRET,
            &format!("EvFail{n}"),
            &format!("U{}", n % 50),
            &format!("1700000200.{n:06}"),
            &format!("message {n}"),
        );
        (path.clone(), signed)
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = cluster.kill_master().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let n = load.stop().await;
    assert!(
        n > 200,
        "the load ran ({n} events) across the failover of {killed}"
    );
    assert_each_event_once(&app.db, n).await;
    // The pods carried on without a restart: both ready again after the failover.
    for p in &app.pods {
        p.wait_ready().await;
    }
}

#[tokio::test]
async fn cluster_realtime_survives_the_failover_of_its_shard() {
    let mut cluster = RedisCluster::start(3, 1).await;
    let app = two_pods_on(&cluster).await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org_via(1).await;
    let mut sock = connect_with(a, &org.token).await;
    let path = org.webhook("slack");
    let webhook = |n: usize| {
        slack(
            SLACK_SECRET,
            &format!("EvShard{n}"),
            &format!("U{n}"),
            &format!("1700000300.{n:06}"),
            &format!("message {n}"),
        )
    };
    assert_eq!(b.send_webhook(&path, &webhook(1)).await.0, 200);
    let before = sock.take(2).await;
    assert_eq!(
        before.len(),
        2,
        "events cross pods before the failover: {before:?}"
    );
    let first_conversation = before[0].1["conversation_id"].clone();

    // The adapter's channels all carry the `{sio}` tag: kill the master of that shard.
    let killed = cluster.kill(cluster.master_of("{sio}")).await;
    // What is published before A subscribes again is lost to its sockets (`GET /events`
    // fills such gaps); A's watchdog repairs the subscriptions within seconds.
    let ready = a
        .ready_until(Duration::from_secs(30), |r| {
            r["realtime"]["adapter"]["ok"] == true
        })
        .await;
    let adapter = &ready["realtime"]["adapter"];
    assert_eq!(adapter["ok"], true, "A's subscriptions are back: {adapter}");
    let signed = webhook(2);
    let accepted = || async { (b.send_webhook(&path, &signed).await.0 == 200).then_some(()) };
    let every = Duration::from_millis(100);
    assert!(
        try_eventually_every(Duration::from_secs(10), every, accepted)
            .await
            .is_some(),
        "webhooks are accepted after the failover of {killed}"
    );
    let mut seen = Vec::new();
    let mine = sock
        .next_matching(Duration::from_secs(30), |name, data| {
            seen.push(name.to_owned());
            // Another customer, so another conversation than the first webhook's.
            name == "message_created" && data["conversation_id"] != first_conversation
        })
        .await;
    assert!(
        mine.is_some(),
        "the socket on A never got the event of a webhook B took after the failover: {seen:?}"
    );
    sock.close().await;
}

#[tokio::test]
async fn cluster_tls_with_an_unrelated_ca_is_not_ready_and_names_redis_tls_ca() {
    // The managed topology's TLS cluster (scripts/test.sh SB_TOPOLOGY=managed, which CI
    // runs); the plaintext cluster of the other tests has no certificate to distrust.
    let (Some(nodes), Ok(other_ca)) = (
        switchboard_testing::redis_cluster_nodes(),
        std::env::var("SB_TEST_TLS_OTHER_CA"),
    ) else {
        eprintln!("skipped: needs SB_TOPOLOGY=managed (a TLS Redis Cluster)");
        return;
    };
    let app = TestApp::builder()
        .env("REDIS_CLUSTER_NODES", &nodes)
        .env("REDIS_TLS_CA", &other_ca)
        // Refused handshakes with each seed take their time on a busy box: the check must
        // get to the TLS error, not stop at its deadline.
        .env("READY_TIMEOUT_MS", "5000")
        .build()
        .await;
    let (status, ready) = app.pod(0).ready().await;
    assert_eq!(status, 503);
    assert_eq!(ready["checks"]["redis"]["ok"], false, "{ready}");
    assert_eq!(
        ready["checks"]["redis"]["setting"], "REDIS_TLS_CA",
        "{ready}"
    );
    assert_eq!(ready["checks"]["redis_work"]["ok"], false, "{ready}");
}

#[tokio::test]
async fn a_pod_starts_while_the_cluster_is_away_and_is_ready_once_it_comes() {
    let mut cluster = RedisCluster::start(3, 0).await;
    let seeds = cluster.seeds();
    // Every node goes away; the pod starts anyway and says Redis is not there.
    let ports = cluster.stop_all();
    let app = TestApp::builder()
        .env("REDIS_CLUSTER_NODES", &seeds)
        .build()
        .await;
    let pod = app.pod(0);
    assert_eq!(pod.ready().await.0, 503);
    assert_eq!(pod.status("/health").await, 200);
    // The nodes come back with their cluster configuration: the pod connects by itself.
    for port in ports {
        cluster.restart(port).await;
    }
    let ready = pod
        .ready_until(Duration::from_secs(30), |r| r["status"] == "ready")
        .await;
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["checks"]["redis_work"]["ok"], true, "{ready}");
}
