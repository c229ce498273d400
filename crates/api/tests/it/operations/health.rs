use std::time::{Duration, Instant};
use switchboard_testing::{RedisServer, TestApp, TestPod};

#[tokio::test]
async fn ready_turns_503_naming_redis_when_redis_stops_and_recovers() {
    let mut redis = RedisServer::start().await;
    let app = TestApp::builder().redis(&redis.url()).build().await;
    let pod = app.pod(0);
    assert_eq!(pod.status("/ready").await, 200);

    // The answer above is served again for up to a second; the next one runs the checks.
    redis.stop();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let started = Instant::now();
    let (status, body) = pod.ready().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "checks have short timeouts"
    );
    assert_eq!(status, 503);
    assert_eq!(body["checks"]["redis"]["ok"], false, "{body}");
    assert_eq!(body["checks"]["postgres"]["ok"], true, "{body}");
    // Liveness does not depend on Redis.
    assert_eq!(pod.status("/health").await, 200);

    redis.restart().await;
    pod.wait_ready().await;
}

#[tokio::test]
async fn ready_is_503_while_draining_then_the_listener_closes() {
    let app = TestApp::builder()
        .env("DRAIN_DELAY_MS", "800")
        .build()
        .await;
    let pod = app.pod(0);
    assert_eq!(pod.status("/ready").await, 200);
    pod.server.begin_shutdown();
    let (status, body) = pod.ready().await;
    assert_eq!(status, 503);
    assert_eq!(body["draining"], true);
    // Still serving during the drain delay.
    assert_eq!(pod.status("/health").await, 200);
    let url = pod.url("/health");
    let TestApp { mut pods, .. } = app;
    let TestPod { server, .. } = pods.remove(0);
    tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("stops within the budget")
        .expect("clean stop");
    let fresh = switchboard_testing::http();
    assert!(fresh.get(url).send().await.is_err(), "listener is closed");
}

#[tokio::test]
async fn a_pooled_connection_postgres_closed_is_replaced_before_use() {
    // The relay's idle poll (every 250 ms) and `autopilot-send` (every 2 s) would keep one
    // pooled session or another busy; commits still wake the relay, and there are none here.
    let (pod, db) = TestPod::single_with(|v| {
        v.insert("RELAY_POLL_MS".into(), "60000".into());
        v.insert("SCHEDULE_AUTOPILOT_SEND".into(), "0 0 0 1 1 *".into());
    })
    .await;
    assert_eq!(pod.ready().await.0, 200, "the pool holds a live connection");

    // Postgres restarts or an operator terminates the pod's sessions while they sit idle:
    // each of them, for longer than the pool lets a session go unchecked. Awaited, not slept:
    // a scheduled job's run, later on a loaded machine, can use one at any time.
    let admin = db.pool().await;
    let idle_for = switchboard_store::IDLE_CHECK_AFTER + Duration::from_millis(300);
    let all_idle = || async {
        let busy: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'switchboard'
                AND (state <> 'idle' OR now() - state_change < make_interval(secs => $1))",
        )
        .bind(idle_for.as_secs_f64())
        .fetch_one(&admin)
        .await
        .unwrap();
        (busy == 0).then_some(())
    };
    switchboard_testing::eventually(
        "every pooled session idle",
        Duration::from_secs(20),
        all_idle,
    )
    .await;
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'switchboard') t",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(killed >= 1, "the pod had pooled sessions");

    let (status, body) = pod.ready().await;
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
        let (_, body) = pod.ready().await;
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
