//! Redis Cluster: every script and pipeline the pod runs works when its keys' slots are
//! spread over several masters, and two pods on a cluster take webhooks, share realtime
//! events and send a released reply once. A cluster of the test's own (three masters) is
//! used, so this runs in every topology.

use crate::inbound_support::{agent, send, wait_for_count};
use crate::outbound_support::{Provider, org, pod, release_ok, wait_outbox};
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_config::{RedisEndpoint, RedisTls};
use switchboard_coord::subscription::{self, Notice};
use switchboard_coord::{Redis, dedup};
use switchboard_flows::queue::{InboundQueue, OutboundQueue};
use switchboard_flows::redis_check::RedisWork;
use switchboard_testing::socket::connect_with;
use switchboard_testing::{RedisCluster, TestDb, random_prefix, signing};

fn on(cluster: &RedisCluster, prefix: &str) -> Redis {
    let endpoint = RedisEndpoint {
        urls: cluster.seeds().split(',').map(str::to_owned).collect(),
        cluster: true,
        tls: RedisTls::Off,
    };
    Redis::connect(&endpoint, prefix).expect("cluster handle")
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
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let token = tokio_util::sync::CancellationToken::new();
    let listener = {
        let (redis, channel, token) = (redis.clone(), channel.clone(), token.clone());
        tokio::spawn(async move {
            subscription::subscribe(&redis, &channel, Duration::from_millis(200), token, |n| {
                let _ = tx.send(n);
            })
            .await;
        })
    };
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(matches!(first, Ok(Some(Notice::Subscribed))), "{first:?}");
    // SPUBLISH counts the node's sharded subscribers: this one.
    assert_eq!(redis.publish(&channel, "hello").await.expect("publish"), 1);
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(
        matches!(&got, Ok(Some(Notice::Message(m))) if m == "hello"),
        "{got:?}"
    );

    // The channel's master dies: the loop reports the loss, subscribes on the promoted
    // master, and hears what is published there.
    cluster.kill(cluster.master_of(&channel)).await;
    let mut notices = Vec::new();
    let resubscribed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(n) = rx.recv().await {
            let back = matches!(n, Notice::Subscribed);
            notices.push(format!("{n:?}"));
            if back {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(resubscribed, Ok(true), "{notices:?}");
    assert!(notices.iter().any(|n| n == "Lost"), "{notices:?}");
    assert_eq!(redis.publish(&channel, "again").await.expect("publish"), 1);
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert!(
        matches!(&got, Ok(Some(Notice::Message(m))) if m == "again"),
        "{got:?}"
    );
    token.cancel();
    listener.await.expect("listener ends");
}

#[tokio::test]
async fn cluster_two_pods_take_webhooks_share_events_and_send_a_release_once() {
    let cluster = RedisCluster::start(3, 0).await;
    let seeds = cluster.seeds();
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let provider = Provider::start().await;
    let prefix = random_prefix();
    let on_cluster = [("REDIS_CLUSTER_NODES", seeds.as_str())];
    // A runs no workers, so every job is B's and every event A's socket gets crossed pods.
    let a = pod(
        &db,
        &prefix,
        &provider,
        &agent.uri(),
        &[
            ("REDIS_CLUSTER_NODES", seeds.as_str()),
            ("WORKER_CONCURRENCY", "0"),
        ],
    )
    .await;
    let b = pod(&db, &prefix, &provider, &agent.uri(), &on_cluster).await;
    for p in [&a, &b] {
        let mut ready = Value::Null;
        for _ in 0..100 {
            let r = p.client.get(p.url("/ready")).send().await.expect("ready");
            ready = r.json().await.expect("json");
            if ready["status"] == "ready" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(ready["status"], "ready", "{ready}");
        assert_eq!(ready["checks"]["redis_work"]["ok"], true, "{ready}");
    }
    let org = org(&db, &b).await;
    let mut sock = connect_with(&a, &org.token).await;

    let path = format!("/webhooks/slack/{}", org.conns["slack"]);
    let signed = signing::slack(
        "slack-signing-secret",
        "EvCluster1",
        "U1",
        "1700000100.000001",
        "where is my order?",
    );
    assert_eq!(send(&b, &path, &signed).await.0, 200);
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM expert_queue", 1).await,
        1
    );
    let got = sock.take(2).await;
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["message_created", "queue_item_created"], "{got:?}");
    let item: uuid::Uuid = got[1].1["id"].as_str().expect("id").parse().expect("uuid");

    let outbox = release_ok(&a, &org.token, item, None).await;
    let sent = wait_outbox(&db, outbox, "sent").await;
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(provider.calls("slack").len(), 1, "one provider call");
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
    let db = TestDb::fresh().await;
    let pod = switchboard_testing::TestPod::start_with(
        &db,
        &switchboard_testing::redis_url(),
        &random_prefix(),
        |v| {
            v.insert("REDIS_CLUSTER_NODES".into(), standalone.url());
        },
    )
    .await;
    let mut ready = Value::Null;
    for _ in 0..50 {
        let r = pod
            .client
            .get(pod.url("/ready"))
            .send()
            .await
            .expect("ready");
        assert_eq!(r.status(), 503);
        ready = r.json().await.expect("json");
        if ready["checks"]["redis_work"]["error"] == "failed at: limiter" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready["checks"]["redis"]["ok"], false, "{ready}");
    assert_eq!(
        ready["checks"]["redis_work"]["error"], "failed at: limiter",
        "{ready}"
    );
}

#[tokio::test]
async fn cluster_master_failover_under_load_loses_and_doubles_nothing() {
    let mut cluster = RedisCluster::start(3, 1).await;
    let seeds = cluster.seeds();
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let prefix = random_prefix();
    let settings = [
        ("REDIS_CLUSTER_NODES", seeds.as_str()),
        // What the lost master had not replicated is re-enqueued from the inbox quickly.
        ("INBOX_GRACE_SECS", "1"),
        ("INBOX_SWEEP_INTERVAL_MS", "500"),
    ];
    let a = crate::inbound_support::pod_with(
        &db,
        &switchboard_testing::redis_url(),
        &prefix,
        &agent.uri(),
        &settings,
    )
    .await;
    let b = crate::inbound_support::pod_with(
        &db,
        &switchboard_testing::redis_url(),
        &prefix,
        &agent.uri(),
        &settings,
    )
    .await;
    let (_, conns) = crate::inbound_support::connections(&db, &a).await;
    let path = format!("/webhooks/slack/{}", conns[0].1);
    let pods = std::sync::Arc::new([a, b]);

    // About 100 webhooks a second, alternating pods; each retried until answered 200, as a
    // provider does.
    let stop = tokio_util::sync::CancellationToken::new();
    let load = {
        let (stop, pods, path) = (stop.clone(), pods.clone(), path.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut tasks = tokio::task::JoinSet::new();
            let mut n = 0_usize;
            while !stop.is_cancelled() {
                tick.tick().await;
                let signed = signing::slack(
                    "slack-signing-secret",
                    &format!("EvFail{n}"),
                    &format!("U{}", n % 50),
                    &format!("1700000200.{n:06}"),
                    &format!("message {n}"),
                );
                let (pods, path) = (pods.clone(), path.clone());
                tasks.spawn(async move {
                    for attempt in 0..200 {
                        if send(&pods[(n + attempt) % 2], &path, &signed).await.0 == 200 {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    panic!("event {n} never accepted");
                });
                n += 1;
            }
            while let Some(done) = tasks.join_next().await {
                done.expect("delivery");
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = cluster.kill_master().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let n = i64::try_from(load.await.expect("load")).expect("count");
    assert!(
        n > 200,
        "the load ran ({n} events) across the failover of {killed}"
    );
    let processed = wait_for_count(
        &db,
        "SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL",
        n,
    )
    .await;
    assert_eq!(processed, n, "every accepted event processed");
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, n);
    assert_eq!(
        db.count("SELECT count(*) FROM messages WHERE direction = 'inbound'")
            .await,
        n,
        "one message per event"
    );
    // The pods carried on without a restart: both still ready.
    for p in pods.iter() {
        let mut status = 0;
        for _ in 0..100 {
            status = p
                .client
                .get(p.url("/ready"))
                .send()
                .await
                .expect("ready")
                .status()
                .as_u16();
            if status == 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(status, 200, "ready again after the failover");
    }
}

#[tokio::test]
async fn cluster_realtime_survives_the_failover_of_its_shard() {
    let mut cluster = RedisCluster::start(3, 1).await;
    let seeds = cluster.seeds();
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let provider = Provider::start().await;
    let prefix = random_prefix();
    let a = pod(
        &db,
        &prefix,
        &provider,
        &agent.uri(),
        &[
            ("REDIS_CLUSTER_NODES", seeds.as_str()),
            ("WORKER_CONCURRENCY", "0"),
        ],
    )
    .await;
    let b = pod(
        &db,
        &prefix,
        &provider,
        &agent.uri(),
        &[("REDIS_CLUSTER_NODES", seeds.as_str())],
    )
    .await;
    let org = org(&db, &b).await;
    let mut sock = connect_with(&a, &org.token).await;
    let path = format!("/webhooks/slack/{}", org.conns["slack"]);
    let webhook = |n: usize| {
        signing::slack(
            "slack-signing-secret",
            &format!("EvShard{n}"),
            &format!("U{n}"),
            &format!("1700000300.{n:06}"),
            &format!("message {n}"),
        )
    };
    assert_eq!(send(&b, &path, &webhook(1)).await.0, 200);
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
    let mut adapter = Value::Null;
    for _ in 0..300 {
        let ready: Value = a
            .client
            .get(a.url("/ready"))
            .send()
            .await
            .expect("ready")
            .json()
            .await
            .expect("json");
        adapter = ready["realtime"]["adapter"].clone();
        if adapter["ok"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(adapter["ok"], true, "A's subscriptions are back: {adapter}");
    let signed = webhook(2);
    let mut accepted = false;
    for _ in 0..100 {
        if send(&b, &path, &signed).await.0 == 200 {
            accepted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        accepted,
        "webhooks are accepted after the failover of {killed}"
    );
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Some((name, data)) = sock.next(Duration::from_secs(1)).await {
            // Another customer, so another conversation than the first webhook's.
            let mine = name == "message_created" && data["conversation_id"] != first_conversation;
            seen.push(name);
            if mine {
                sock.close().await;
                return;
            }
        }
    }
    panic!("the socket on A never got the event of a webhook B took after the failover: {seen:?}");
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
    let db = TestDb::fresh().await;
    let pod = switchboard_testing::TestPod::start_with(
        &db,
        &switchboard_testing::redis_url(),
        &random_prefix(),
        |v| {
            v.insert("REDIS_CLUSTER_NODES".into(), nodes);
            v.insert("REDIS_TLS_CA".into(), other_ca);
        },
    )
    .await;
    let r = pod
        .client
        .get(pod.url("/ready"))
        .send()
        .await
        .expect("ready");
    assert_eq!(r.status(), 503);
    let ready: Value = r.json().await.expect("json");
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
    let db = TestDb::fresh().await;
    let pod = switchboard_testing::TestPod::start_with(
        &db,
        &switchboard_testing::redis_url(),
        &random_prefix(),
        |v| {
            v.insert("REDIS_CLUSTER_NODES".into(), seeds.clone());
        },
    )
    .await;
    let r = pod
        .client
        .get(pod.url("/ready"))
        .send()
        .await
        .expect("ready");
    assert_eq!(r.status(), 503);
    assert_eq!(
        pod.client
            .get(pod.url("/health"))
            .send()
            .await
            .expect("health")
            .status(),
        200
    );
    // The nodes come back with their cluster configuration: the pod connects by itself.
    for port in ports {
        cluster.restart(port).await;
    }
    let mut ready = Value::Null;
    for _ in 0..150 {
        let r = pod
            .client
            .get(pod.url("/ready"))
            .send()
            .await
            .expect("ready");
        ready = r.json().await.expect("json");
        if ready["status"] == "ready" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["checks"]["redis_work"]["ok"], true, "{ready}");
}
