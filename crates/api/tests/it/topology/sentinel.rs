//! Redis Sentinel: pods find the master through three sentinels and follow it when they
//! promote the replica, whether the master is handed over (`SENTINEL FAILOVER`) or killed.
//! Commands, pub/sub, webhooks, realtime and releases carry on; a wrong setting fails
//! readiness with its name. A sentinel set of the test's own (a master, a replica, three
//! sentinels) is used, so this runs in every topology.

use std::time::Duration;
use switchboard_config::{RedisAuth, RedisEndpoint, RedisShape, RedisTls, SentinelSettings};
use switchboard_coord::Redis;
use switchboard_coord::subscription::Notice;
use switchboard_testing::signing::{SLACK_SECRET, Signed, slack};
use switchboard_testing::socket::{Sock, connect_with};
use switchboard_testing::{
    Load, RedisSentinel, SENTINEL_MASTER, TestApp, TestAppBuilder, TestPod, random_prefix,
    rows::assert_each_event_once, try_eventually_every, wait_outbox,
};

/// Pods whose Redis is the master `set`'s sentinels name.
fn on_sentinels(set: &RedisSentinel) -> TestAppBuilder {
    TestApp::builder()
        .env("REDIS_SENTINELS", &set.sentinels())
        .env("REDIS_SENTINEL_MASTER", SENTINEL_MASTER)
}

fn webhook(tag: &str, n: usize) -> Signed {
    slack(
        SLACK_SECRET,
        &format!("Ev{tag}{n}"),
        &format!("U{tag}{n}"),
        &format!("1700000400.{n:06}"),
        &format!("message {n}"),
    )
}

/// Sends `signed` to `pod` until it is accepted: right after a failover a pod may answer
/// 503 for a moment, as it does while Redis is away, and a provider retries.
async fn accepted(pod: &TestPod, path: &str, signed: &Signed) {
    let sent = || async { (pod.send_webhook(path, signed).await.0 == 200).then_some(()) };
    let every = Duration::from_millis(100);
    assert!(
        try_eventually_every(Duration::from_secs(15), every, sent)
            .await
            .is_some(),
        "a webhook was not accepted within 15 s"
    );
}

/// Awaits on `sock` the `message_created` of the inbound message whose text is `body`.
async fn hears(sock: &mut Sock, db: &switchboard_testing::TestDb, body: &str, pod: &str) {
    let sql = format!("SELECT count(*) FROM messages WHERE body = '{body}'");
    if db.wait_for_count(&sql, 1).await != 1 {
        let inbox: String = db
            .scalar(&format!(
                "SELECT coalesce(string_agg(attempts || ' attempts, ' || coalesce(last_error, 'no error') || ', ' \
                 || coalesce(processed_at::text, 'unprocessed'), '; '), 'no inbox row') \
                 FROM inbound_events WHERE payload::text LIKE '%{body}%'"
            ))
            .await;
        panic!(
            "\"{body}\" (sent through {pod}'s peer) never became a message; its inbox row: {inbox}"
        );
    }
    let message: uuid::Uuid = db
        .scalar(&format!("SELECT id FROM messages WHERE body = '{body}'"))
        .await;
    let got = sock
        .next_matching(Duration::from_secs(30), |name, data| {
            name == "message_created" && data["message_id"] == message.to_string()
        })
        .await;
    assert!(
        got.is_some(),
        "the socket on {pod} never got the event of \"{body}\": {:?}",
        sock.reported()
    );
}

#[tokio::test]
async fn sentinel_commands_and_pub_sub_follow_a_handover_and_a_killed_master() {
    let mut set = RedisSentinel::start().await;
    let endpoint = RedisEndpoint {
        urls: set
            .sentinels()
            .split(',')
            .map(|a| format!("redis://{a}"))
            .collect(),
        shape: RedisShape::Sentinel(SentinelSettings {
            master: SENTINEL_MASTER.into(),
            sentinel_auth: RedisAuth::default(),
            node_auth: RedisAuth::default(),
        }),
        tls: RedisTls::Off,
    };
    let redis = Redis::connect(&endpoint, &random_prefix()).expect("sentinel handle");
    let channel = redis.key("sentinel-test:pushed");
    let mut listener = super::Listener::start(&redis, &channel).await;
    assert!(
        redis
            .set_nx("claim:1", "x", Duration::from_secs(60))
            .await
            .expect("write")
    );
    assert_eq!(redis.publish(&channel, "hello").await.expect("publish"), 1);
    listener.hears("hello").await;

    // Handed over: the old master is now a replica, where a write would be refused. The
    // handle writes on the new master, and the subscription moves there too (the master
    // counts it: a subscriber left on the replica would hear, but not be counted).
    let old = set.master();
    let new = set.failover().await;
    assert_ne!(old, new);
    let wrote = || async {
        redis
            .set_nx("claim:2", "x", Duration::from_secs(60))
            .await
            .ok()
    };
    let every = Duration::from_millis(100);
    assert_eq!(
        try_eventually_every(Duration::from_secs(10), every, wrote).await,
        Some(true),
        "writes reach the master handed over to ({new})"
    );
    assert!(
        !redis
            .set_nx("claim:1", "x", Duration::from_secs(60))
            .await
            .expect("read the replicated claim")
    );
    let (back, moved) = super::until_subscribed(&mut listener.rx, Duration::from_secs(10)).await;
    assert!(back, "the subscription moved within 10 s: {moved:?}");
    assert_eq!(moved, ["Lost", "Subscribed"], "{moved:?}");
    assert_eq!(redis.publish(&channel, "again").await.expect("publish"), 1);
    listener.hears("again").await;

    // Killed: the subscription is lost and made again on the promoted master.
    let (killed, promoted) = set.kill_master().await;
    assert_eq!(killed, new);
    let (resubscribed, notices) =
        super::until_subscribed(&mut listener.rx, Duration::from_secs(30)).await;
    assert!(resubscribed, "{notices:?}");
    let wrote = || async {
        redis
            .set_nx("claim:3", "x", Duration::from_secs(60))
            .await
            .ok()
    };
    let every = Duration::from_millis(100);
    assert_eq!(
        try_eventually_every(Duration::from_secs(10), every, wrote).await,
        Some(true),
        "writes reach the master promoted in place of {killed} ({promoted})"
    );
    // The loop may move once more when the handle's own connection follows the promotion:
    // publish until the master counts the subscriber, then it hears the message.
    let counted = || async { (redis.publish(&channel, "third").await.ok()? == 1).then_some(()) };
    assert!(
        try_eventually_every(Duration::from_secs(10), every, counted)
            .await
            .is_some(),
        "the subscription is on the promoted master"
    );
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(n) = listener.rx.recv().await {
            if matches!(&n, Notice::Message(m) if m == "third") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        heard,
        Ok(true),
        "the subscriber heard what the promoted master published"
    );
    listener.stop().await;
}

#[tokio::test]
async fn sentinel_two_pods_take_webhooks_share_events_and_send_a_release_once() {
    let set = RedisSentinel::start().await;
    let app = on_sentinels(&set)
        .pods(2)
        .fake_agent()
        .fake_provider()
        .pod_env(0, "WORKER_CONCURRENCY", "0")
        .build()
        .await;
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
    assert_eq!(
        b.send_webhook(&org.webhook("slack"), &webhook("Two", 0))
            .await
            .0,
        200
    );
    let got = sock.take(2).await;
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["message_created", "queue_item_created"], "{got:?}");
    let item: uuid::Uuid = got[1].1["id"].as_str().expect("id").parse().expect("uuid");

    let outbox = a.as_user(&org.token).release_ok(item, None).await;
    let sent = wait_outbox(db, outbox, "sent").await;
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
    db.wait_for_job_runs("outbox-sweeper", 2).await;
    assert_eq!(app.provider().calls("slack").len(), 1, "one provider call");
    sock.close().await;
}

#[tokio::test]
async fn sentinel_failover_under_load_loses_and_doubles_nothing_and_sockets_keep_hearing() {
    let mut set = RedisSentinel::start().await;
    let app = on_sentinels(&set)
        .pods(2)
        .fake_agent()
        // What the lost master had not replicated is re-enqueued from the inbox quickly.
        .env("INBOX_GRACE_SECS", "1")
        .env("INBOX_SWEEP_INTERVAL_MS", "500")
        .env("REALTIME_WATCHDOG_MS", "500")
        .build()
        .await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org().await;
    let path = org.webhook("slack");
    let mut socks = [
        connect_with(a, &org.token).await,
        connect_with(b, &org.token).await,
    ];

    // About 100 webhooks a second, alternating pods; each retried until answered 200, as a
    // provider does.
    let bases = app.pods.iter().map(|p| p.base.clone()).collect();
    let load = Load::start(bases, {
        let path = path.clone();
        move |n| (path.clone(), webhook("Load", n as usize))
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let handed_to = set.failover().await;
    // The sentinels refuse a second failover of the same master for twice their failover
    // timeout (2 s here).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (killed, promoted) = set.kill_master().await;
    assert_eq!(killed, handed_to);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let n = load.stop().await;
    assert!(
        n > 500,
        "the load ran ({n} events) across the handover and the kill"
    );
    assert_each_event_once(&app.db, n).await;

    // Both pods carried on without a restart, and each one's sockets hear what the other
    // pod takes after the failovers.
    for p in &app.pods {
        p.wait_ready().await;
    }
    // Each pod's sockets hear what the other takes after the failovers (each watchdog
    // subscribed again on the promoted master). Each webhook is its own Slack event and
    // message (`ts`): one with another's would rightly be taken as a duplicate.
    let turns = [
        (0, "A", b, "B", "1700000500.000001"),
        (1, "B", a, "A", "1700000500.000002"),
    ];
    for (hearer, hearer_name, via, via_name, ts) in turns {
        let ready = app
            .pod(hearer)
            .ready_until(Duration::from_secs(30), |r| {
                r["realtime"]["adapter"]["ok"] == true
            })
            .await;
        assert_eq!(ready["realtime"]["adapter"]["ok"], true, "{ready}");
        let body = format!("after the failovers, through {via_name}");
        let event = format!("EvAfter{via_name}");
        let signed = slack(SLACK_SECRET, &event, "UAfter", ts, &body);
        accepted(via, &path, &signed).await;
        hears(&mut socks[hearer], &app.db, &body, hearer_name).await;
    }
    assert_ne!(promoted, killed, "another node took over");
    for sock in socks {
        sock.close().await;
    }
}

#[tokio::test]
async fn sentinel_settings_that_reach_no_master_fail_readiness_with_the_setting_named() {
    let set = RedisSentinel::start().await;
    let cases = [
        // The sentinels answer but monitor no master of that name.
        (set.sentinels(), "not-the-master", "REDIS_SENTINEL_MASTER"),
        // Nothing listens where the sentinels are said to be.
        (
            format!("127.0.0.1:{}", switchboard_testing::free_port()),
            SENTINEL_MASTER,
            "REDIS_SENTINELS",
        ),
    ];
    for (sentinels, master, setting) in cases {
        let app = TestApp::builder()
            .env("REDIS_SENTINELS", &sentinels)
            .env("REDIS_SENTINEL_MASTER", master)
            .build()
            .await;
        let pod = app.pod(0);
        let named = |r: &serde_json::Value| r["checks"]["redis"]["setting"] == setting;
        let ready = || async {
            let (status, ready) = pod.ready().await;
            assert_eq!(status, 503, "{ready}");
            ready
        };
        let ready = switchboard_testing::settled(Duration::from_secs(5), ready, named).await;
        assert_eq!(ready["checks"]["redis"]["ok"], false, "{ready}");
        assert_eq!(ready["checks"]["redis"]["setting"], setting, "{ready}");
        assert_eq!(pod.status("/health").await, 200);
    }
}

#[tokio::test]
async fn sentinel_logins_refused_fail_readiness_naming_whose_password_and_the_right_ones_serve() {
    let set = RedisSentinel::start_with_password("s3cret-sentinel-set").await;
    let cases = [
        // The sentinels let the pod in; the master does not.
        ("s3cret-sentinel-set", "wrong", Some("REDIS_PASSWORD")),
        // The sentinels refuse it before any master is named.
        (
            "wrong",
            "s3cret-sentinel-set",
            Some("REDIS_SENTINEL_PASSWORD"),
        ),
        ("s3cret-sentinel-set", "s3cret-sentinel-set", None),
    ];
    for (sentinel_password, password, setting) in cases {
        let app = TestApp::builder()
            .env("REDIS_SENTINELS", &set.sentinels())
            .env("REDIS_SENTINEL_MASTER", SENTINEL_MASTER)
            .env("REDIS_SENTINEL_PASSWORD", sentinel_password)
            .env("REDIS_PASSWORD", password)
            .build()
            .await;
        let pod = app.pod(0);
        match setting {
            Some(setting) => {
                let named = |r: &serde_json::Value| r["checks"]["redis"]["setting"] == setting;
                let ready = || async {
                    let (status, ready) = pod.ready().await;
                    assert_eq!(status, 503, "{ready}");
                    ready
                };
                let ready =
                    switchboard_testing::settled(Duration::from_secs(5), ready, named).await;
                assert_eq!(ready["checks"]["redis"]["ok"], false, "{ready}");
                assert_eq!(ready["checks"]["redis"]["setting"], setting, "{ready}");
                let text = ready.to_string();
                assert!(!text.contains("s3cret"), "no password in /ready: {text}");
            }
            None => pod.wait_ready().await,
        }
    }
}
