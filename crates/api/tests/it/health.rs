use serde_json::Value;
use std::time::{Duration, Instant};
use switchboard_testing::{RedisServer, TestDb, TestPod, random_prefix};

#[tokio::test]
async fn ready_turns_503_naming_redis_when_redis_stops_and_recovers() {
    let db = TestDb::fresh().await;
    let mut redis = RedisServer::start().await;
    let pod = TestPod::start_with(&db, &redis.url(), &random_prefix(), |_| {}).await;

    let r = pod.client.get(pod.url("/ready")).send().await.unwrap();
    assert_eq!(r.status(), 200);

    // The answer above is served again for up to a second; the next one runs the checks.
    redis.stop();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let started = Instant::now();
    let r = pod.client.get(pod.url("/ready")).send().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "checks have short timeouts"
    );
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["checks"]["redis"]["ok"], false, "{body}");
    assert_eq!(body["checks"]["postgres"]["ok"], true, "{body}");
    // Liveness does not depend on Redis.
    let r = pod.client.get(pod.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), 200);

    redis.restart().await;
    let mut last = 0;
    for _ in 0..50 {
        last = pod
            .client
            .get(pod.url("/ready"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        if last == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, 200, "readiness recovers once Redis is back");
}

#[tokio::test]
async fn ready_is_503_while_draining_then_the_listener_closes() {
    let db = TestDb::fresh().await;
    let pod = TestPod::start_with(
        &db,
        &switchboard_testing::redis_url(),
        &random_prefix(),
        |v| {
            v.insert("DRAIN_DELAY_MS".into(), "800".into());
        },
    )
    .await;
    assert_eq!(
        pod.client
            .get(pod.url("/ready"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    pod.server.begin_shutdown();
    let r = pod.client.get(pod.url("/ready")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["draining"], true);
    // Still serving during the drain delay.
    assert_eq!(
        pod.client
            .get(pod.url("/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let url = pod.url("/health");
    let TestPod { server, .. } = pod;
    tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("stops within the budget")
        .expect("clean stop");
    let fresh = switchboard_testing::http();
    assert!(fresh.get(url).send().await.is_err(), "listener is closed");
}

#[tokio::test]
async fn a_pooled_connection_postgres_closed_is_replaced_before_use() {
    let (pod, db) = TestPod::single().await;
    let ready = || async {
        let r = pod.client.get(pod.url("/ready")).send().await.unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!(ready().await.0, 200, "the pool holds a live connection");

    // Postgres restarts or an operator terminates the pod's sessions while they sit idle.
    tokio::time::sleep(switchboard_store::IDLE_CHECK_AFTER + Duration::from_millis(300)).await;
    let admin = db.pool().await;
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'switchboard') t",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(killed >= 1, "the pod had pooled sessions");

    let (status, body) = ready().await;
    assert_eq!(
        status, 200,
        "the dead session is checked and replaced: {body}"
    );
    assert_eq!(body["checks"]["postgres"]["ok"], true, "{body}");
}

#[tokio::test]
async fn ready_runs_its_checks_at_most_once_a_second() {
    let (pod, _db) = TestPod::single().await;
    let probe = || async {
        let body: Value = pod
            .client
            .get(pod.url("/ready"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["checked_at"].as_str().unwrap().to_owned()
    };
    let first = probe().await;
    // A burst within the second gets that same answer (or, past the second, one more run).
    let burst = futures::future::join_all((0..20).map(|_| probe())).await;
    let runs: std::collections::BTreeSet<&String> =
        std::iter::once(&first).chain(burst.iter()).collect();
    assert!(runs.len() <= 2, "{runs:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let later = probe().await;
    assert!(
        !runs.contains(&later),
        "a new run after the second: {later}"
    );
}
