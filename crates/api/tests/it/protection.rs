//! Protection: shared GCRA rate limits across pods, shadow mode, the per-pod fallback while
//! Redis is down (login keeps working, one alert), the login limits' order, backpressure, and
//! metrics labels no request can multiply.

use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_domain::Role;
use switchboard_testing::{RedisServer, TestDb, TestPod, random_prefix, redis_url, seed_member};
use tokio::io::AsyncWriteExt;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

/// Counts the alerts (`switchboard::alert` events) raised on this test's thread, by kind.
#[derive(Clone, Default)]
struct Alerts(Arc<Mutex<HashMap<String, usize>>>);

struct Kind(Option<String>);

impl Visit for Kind {
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "alert" {
            self.0 = Some(value.to_owned());
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Alerts {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "switchboard::alert" {
            return;
        }
        let mut kind = Kind(None);
        event.record(&mut kind);
        if let Some(kind) = kind.0 {
            *self.0.lock().unwrap().entry(kind).or_default() += 1;
        }
    }
}

impl Alerts {
    fn count(&self, kind: &str) -> usize {
        self.0.lock().unwrap().get(kind).copied().unwrap_or(0)
    }
}

fn set(pairs: &[(&str, &str)]) -> impl Fn(&mut HashMap<String, String>) + Clone {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |v: &mut HashMap<String, String>| v.extend(pairs.iter().cloned())
}

async fn get_as(pod: &TestPod, path: &str, client_ip: &str) -> reqwest::Response {
    pod.client
        .get(pod.url(path))
        .header("x-forwarded-for", client_ip)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_limit_of_100_a_minute_holds_across_two_pods() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let limits = set(&[
        ("RATE_LIMIT_DEFAULT", "100/min"),
        ("TRUSTED_PROXIES", "127.0.0.1"),
    ]);
    let a = TestPod::start_with(&db, &redis_url(), &prefix, limits.clone()).await;
    let b = TestPod::start_with(&db, &redis_url(), &prefix, limits).await;
    // GCRA lets one more request in every 600 ms; a run slower than that (a loaded machine)
    // is tried again from a fresh client address.
    for attempt in 0..3 {
        let ip = format!("203.0.113.{}", 10 + attempt);
        let started = Instant::now();
        let statuses: Vec<u16> = futures::stream::iter(0..100)
            .map(|i| {
                let pod = if i % 2 == 0 { &a } else { &b };
                let ip = ip.clone();
                async move { get_as(pod, "/auth/me", &ip).await.status().as_u16() }
            })
            .buffer_unordered(20)
            .collect()
            .await;
        let r = get_as(&b, "/auth/me", &ip).await;
        if started.elapsed() > Duration::from_millis(550) {
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
        assert_eq!(get_as(&a, "/auth/me", &ip).await.status(), 429);
        assert_eq!(get_as(&a, "/auth/me", "198.51.100.1").await.status(), 401);
        // Health checks are never limited.
        assert_eq!(get_as(&a, "/health", &ip).await.status(), 200);
        return;
    }
    panic!("three runs of 101 requests each took longer than 550 ms");
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
    let db = TestDb::fresh().await;
    let pod = TestPod::start_with(
        &db,
        &redis_url(),
        &random_prefix(),
        set(&[
            ("RATE_LIMIT_DEFAULT", "5/min"),
            ("RATE_LIMIT_SHADOW", "default"),
        ]),
    )
    .await;
    let metrics = || async {
        pod.client
            .get(pod.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let shadow = r#"policy="default""#;
    let before = counter(&metrics().await, shadow);
    let blocked_before = counter(&metrics().await, "would_block");
    for _ in 0..20 {
        let r = pod.client.get(pod.url("/auth/me")).send().await.unwrap();
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
    let alerts = Alerts::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(alerts.clone()));
    let db = TestDb::fresh().await;
    let mut redis = RedisServer::start().await;
    let pod = TestPod::start_with(
        &db,
        &redis.url(),
        &random_prefix(),
        // 10 a minute shared by two pods: 5 a minute each while Redis is away.
        set(&[("RATE_LIMIT_DEFAULT", "10/min"), ("EXPECTED_PODS", "2")]),
    )
    .await;
    let (_, email, password) = seed_member(&db, None, Role::Expert).await;
    assert_eq!(
        pod.client
            .get(pod.url("/auth/me"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    redis.stop();

    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(
            pod.client
                .get(pod.url("/auth/me"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(
        statuses,
        [401, 401, 401, 401, 401, 429, 429, 429],
        "a per-pod limit of 5"
    );
    let token = pod.login(&email, &password).await;
    assert!(!token.is_empty());
    let ready: Value = pod
        .client
        .get(pod.url("/ready"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["protection"]["rate_limits"], "local");
    assert_eq!(
        alerts.count("rate_limit_storage_down"),
        1,
        "one alert, not one per request"
    );

    // Shared limiting returns with Redis.
    redis.restart().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let _ = pod.client.get(pod.url("/auth/me")).send().await.unwrap();
        let ready: Value = pod
            .client
            .get(pod.url("/ready"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ready["protection"]["rate_limits"] == "shared" {
            break;
        }
        assert!(Instant::now() < deadline, "shared limiting never came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(alerts.count("rate_limit_storage_down"), 1);
}

#[tokio::test]
async fn a_megabyte_email_is_a_400_and_writes_no_redis_key() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let pod = TestPod::start_with(
        &db,
        &redis_url(),
        &prefix,
        set(&[("BODY_LIMIT_BYTES", "4194304")]),
    )
    .await;
    let email = format!("{}@example.test", "a".repeat(1 << 20));
    let r = pod
        .client
        .post(pod.url("/auth/login"))
        .json(&json!({"email": email, "password": "whatever"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "email_too_long");
    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:limit:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn at_the_in_flight_limit_requests_get_503_and_health_still_answers() {
    let db = TestDb::fresh().await;
    let pod = TestPod::start_with(
        &db,
        &redis_url(),
        &random_prefix(),
        set(&[("MAX_IN_FLIGHT", "1")]),
    )
    .await;
    // One request in flight: its body never finishes arriving.
    let mut slow = tokio::net::TcpStream::connect(pod.server.local_addr())
        .await
        .unwrap();
    slow.write_all(
        b"POST /auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = pod.client.get(pod.url("/auth/me")).send().await.unwrap();
        if r.status() == 503 {
            break r;
        }
        assert!(Instant::now() < deadline, "never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "backpressure");
    assert_eq!(
        pod.client
            .get(pod.url("/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        pod.client
            .get(pod.url("/ready"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        pod.client
            .get(pod.url("/metrics"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    drop(slow);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pod
        .client
        .get(pod.url("/auth/me"))
        .send()
        .await
        .unwrap()
        .status()
        == 503
    {
        assert!(Instant::now() < deadline, "the slot was never given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let render = || async {
        pod.client
            .get(pod.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
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
