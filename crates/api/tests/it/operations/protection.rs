//! Protection: shared GCRA rate limits across pods, shadow mode, the per-pod fallback while
//! Redis is down (login keeps working, one alert), the login limits' order, backpressure, and
//! metrics labels no request can multiply.

use crate::support::alerts::Alerts;
use futures::StreamExt;
use serde_json::Value;
use std::time::{Duration, Instant};
use switchboard_domain::Role;
use switchboard_testing::{
    RedisServer, TestApp, TestPod, redis_keys, seed_member, try_eventually, try_eventually_every,
};
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn a_limit_of_100_per_ten_minutes_holds_across_two_pods() {
    let app = TestApp::builder()
        .pods(2)
        .env("RATE_LIMIT_DEFAULT", "100/10min")
        .env("TRUSTED_PROXIES", "127.0.0.1")
        .build()
        .await;
    let (a, b) = (app.pod(0), app.pod(1));
    // GCRA lets one more request in every 6 s; a run slower than that (a very loaded
    // machine) is tried again from a fresh client address.
    for attempt in 0..3 {
        let ip = format!("203.0.113.{}", 10 + attempt);
        let started = Instant::now();
        let statuses: Vec<u16> = futures::stream::iter(0..100)
            .map(|i| {
                let pod = if i % 2 == 0 { a } else { b };
                let ip = ip.clone();
                async move {
                    pod.forwarded_for(&ip)
                        .get("/auth/me")
                        .await
                        .status()
                        .as_u16()
                }
            })
            .buffer_unordered(20)
            .collect()
            .await;
        let r = b.forwarded_for(&ip).get("/auth/me").await;
        if started.elapsed() > Duration::from_millis(5500) {
            continue;
        }
        assert!(
            statuses.iter().all(|s| *s == 401),
            "the first 100 pass: {statuses:?}"
        );
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["x-ratelimit-limit"], "100");
        assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
        assert!(r.headers().contains_key("retry-after"));
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], "rate_limit");
        // And on the other pod too; another client is not affected.
        assert_eq!(a.forwarded_for(&ip).get("/auth/me").await.status(), 429);
        assert_eq!(
            a.forwarded_for("198.51.100.1")
                .get("/auth/me")
                .await
                .status(),
            401
        );
        // Health checks are never limited.
        assert_eq!(a.forwarded_for(&ip).get("/health").await.status(), 200);
        return;
    }
    panic!("three runs of 101 requests each took longer than 5.5 s");
}

fn counter(metrics: &str, needle: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("rate_limit_decisions_total{") && l.contains(needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn shadow_mode_counts_and_never_refuses() {
    let app = TestApp::builder()
        .env("RATE_LIMIT_DEFAULT", "5/min")
        .env("RATE_LIMIT_SHADOW", "default")
        .build()
        .await;
    let pod = app.pod(0);
    let metrics = || pod.metrics();
    let shadow = r#"policy="default""#;
    let before = counter(&metrics().await, shadow);
    let blocked_before = counter(&metrics().await, "would_block");
    for _ in 0..20 {
        let r = pod.get("/auth/me").await;
        assert_eq!(r.status(), 401, "never refused");
        assert!(
            !r.headers().contains_key("x-ratelimit-limit"),
            "no headers in shadow mode"
        );
    }
    let after = metrics().await;
    assert!(counter(&after, shadow) - before >= 20.0);
    assert!(
        counter(&after, "would_block") - blocked_before >= 15.0,
        "counted"
    );
    assert!(after.contains(r#"mode="shadow""#));
}

#[tokio::test]
async fn with_redis_down_pods_limit_alone_login_works_and_one_alert_is_raised() {
    let alerts = Alerts::by("alert");
    let _guard = alerts.on_this_thread();
    let mut redis = RedisServer::start().await;
    let app = TestApp::builder()
        .redis(&redis.url())
        // 10 a minute shared by two pods: 5 a minute each while Redis is away.
        .env("RATE_LIMIT_DEFAULT", "10/min")
        .env("EXPECTED_PODS", "2")
        .build()
        .await;
    let pod = app.pod(0);
    let (_, email, password) = seed_member(&app.db, None, Role::Expert).await;
    assert_eq!(pod.status("/auth/me").await, 401);
    redis.stop();

    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(pod.status("/auth/me").await);
    }
    assert_eq!(
        statuses,
        [401, 401, 401, 401, 401, 429, 429, 429],
        "a per-pod limit of 5"
    );
    let token = pod.login(&email, &password).await;
    assert!(!token.is_empty());
    let (_, ready) = pod.ready().await;
    assert_eq!(ready["protection"]["rate_limits"], "local");
    assert_eq!(
        alerts.count("rate_limit_storage_down"),
        1,
        "one alert, not one per request"
    );

    // Shared limiting returns with Redis.
    redis.restart().await;
    // Requests meet the limiter, which notices Redis back.
    let shared = || async {
        pod.status("/auth/me").await;
        let (_, ready) = pod.ready().await;
        (ready["protection"]["rate_limits"] == "shared").then_some(())
    };
    let every = Duration::from_millis(200);
    assert!(
        try_eventually_every(Duration::from_secs(20), every, shared)
            .await
            .is_some(),
        "shared limiting never came back"
    );
    assert_eq!(alerts.count("rate_limit_storage_down"), 1);
    // The incident Postgres recorded resolves with Redis back.
    let resolved = || async {
        let pool = app.db.pool().await;
        let status: Option<String> = sqlx::query_scalar(
            "SELECT status FROM alert_incidents WHERE kind = 'rate_limit_storage_down'",
        )
        .fetch_optional(&pool)
        .await
        .unwrap();
        pool.close().await;
        (status.as_deref() == Some("resolved")).then_some(())
    };
    assert!(
        try_eventually_every(Duration::from_secs(10), every, resolved)
            .await
            .is_some(),
        "the incident never resolved"
    );
}

#[tokio::test]
async fn a_megabyte_email_is_a_400_and_writes_no_redis_key() {
    let app = TestApp::builder()
        .env("BODY_LIMIT_BYTES", "4194304")
        .build()
        .await;
    let (pod, prefix) = (app.pod(0), &app.prefix);
    let email = format!("{}@example.test", "a".repeat(1 << 20));
    let (status, body) = pod.try_login(&email, "whatever").await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], "email_too_long");
    let keys = redis_keys(&format!("{prefix}:limit:*")).await;
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn at_the_in_flight_limit_requests_get_503_and_health_still_answers() {
    let app = TestApp::builder().env("MAX_IN_FLIGHT", "1").build().await;
    let pod = app.pod(0);
    // One request in flight: its body never finishes arriving.
    let mut slow = tokio::net::TcpStream::connect(pod.server.local_addr())
        .await
        .unwrap();
    slow.write_all(
        b"POST /auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    let refused = || async {
        let r = pod.get("/auth/me").await;
        (r.status() == 503).then_some(r)
    };
    let r = try_eventually(Duration::from_secs(10), refused)
        .await
        .expect("never refused");
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "backpressure");
    assert_eq!(pod.status("/health").await, 200);
    assert_eq!(pod.status("/ready").await, 200);
    assert_eq!(pod.status("/metrics").await, 200);
    drop(slow);
    let given_back = || async { (pod.status("/auth/me").await != 503).then_some(()) };
    assert!(
        try_eventually(Duration::from_secs(10), given_back)
            .await
            .is_some(),
        "the slot was never given back"
    );
}

fn method_labels(metrics: &str) -> (usize, Vec<String>) {
    let series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("http_requests_total{"))
        .collect();
    let mut methods: Vec<String> = series
        .iter()
        .filter_map(|l| {
            l.split("method=\"")
                .nth(1)?
                .split('"')
                .next()
                .map(str::to_owned)
        })
        .collect();
    methods.sort();
    methods.dedup();
    let other = series
        .iter()
        .filter(|l| l.contains("method=\"other\""))
        .count();
    (other, methods)
}

#[tokio::test]
async fn invented_methods_add_no_series() {
    let (pod, _db) = TestPod::single().await;
    let send = |m: String| {
        let method = reqwest::Method::from_bytes(m.as_bytes()).unwrap();
        pod.client.request(method, pod.url("/expert-queue")).send()
    };
    send("WARMUP".into()).await.unwrap();
    let render = || pod.metrics();
    let (before, _) = method_labels(&render().await);
    let statuses: Vec<u16> = futures::stream::iter(0..5000)
        .map(|i| async move {
            send(format!("INVENTED{i}"))
                .await
                .unwrap()
                .status()
                .as_u16()
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 405), "{:?}", &statuses[..5]);
    let (after, methods) = method_labels(&render().await);
    assert_eq!(after, before, "no new series");
    let known = [
        "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "other",
    ];
    assert!(
        methods.iter().all(|m| known.contains(&m.as_str())),
        "{methods:?}"
    );
}

/// Once a backlog has formed, a webhook waits for a credit that processing mints; with
/// processing stalled (the agent hangs) it waits `PACING_MAX_WAIT_MS` and is still accepted
/// and stored.
#[tokio::test]
async fn with_a_backlog_and_processing_stalled_a_webhook_waits_its_longest_and_is_stored() {
    let agent = switchboard_testing::fakes::agent_answering(
        wiremock::ResponseTemplate::new(200).set_delay(Duration::from_secs(30)),
    )
    .await;
    let app = TestApp::builder()
        .agent(agent)
        .env("INBOUND_CONCURRENCY", "1")
        .env("PACING_BACKLOG", "2")
        .env("ACCEPT_PER_PROCESSED", "1")
        .env("PACING_MAX_WAIT_MS", "400")
        .env("BACKPRESSURE_SAMPLE_MS", "50")
        .build()
        .await;
    let (pod, db) = (app.pod(0), &app.db);
    let hook = app.org().await.webhook("slack");
    let send = |i: usize| {
        let signed = switchboard_testing::signing::slack_message(
            "U1",
            &format!("1700000000.{i:06}"),
            "hello",
        );
        let hook = hook.clone();
        async move { pod.send_webhook(&hook, &signed).await.0 }
    };
    // One event held by the only job (its agent call hangs), the rest wait in the queue.
    for i in 0..4 {
        assert_eq!(send(i).await, 200);
    }
    try_eventually(Duration::from_secs(10), || async {
        pod.metrics()
            .await
            .lines()
            .any(|l| l == "webhooks_pacing 1")
            .then_some(())
    })
    .await
    .expect("the pod paces once the backlog is at PACING_BACKLOG");
    let started = Instant::now();
    assert_eq!(send(4).await, 200, "a paced webhook is still accepted");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(5),
        "waited {waited:?}"
    );
    assert!(
        pod.metrics()
            .await
            .lines()
            .any(|l| l.starts_with("webhooks_pacing_timed_out_total ")),
        "the wait that ran out is counted"
    );
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, 5);
}
