//! kill -9 of the pod running a scheduled job: another pod retries that slot, once.

use crate::switchboard;
use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use switchboard_config::SCHEDULED_JOBS;
use switchboard_testing::{TestDb, free_port, pod_env, random_prefix, redis_url};

const JOB: &str = "queue-upkeep";

fn start(db: &TestDb, prefix: &str, pod: &str, hang: bool) -> (Child, String) {
    let port = free_port();
    let mut vars: HashMap<String, String> = pod_env(db, &redis_url(), prefix);
    vars.insert("PORT".into(), port.to_string());
    vars.insert("POD_ID".into(), pod.into());
    for job in SCHEDULED_JOBS {
        let var = format!("SCHEDULE_{}", job.to_ascii_uppercase().replace('-', "_"));
        vars.insert(var, "0 0 0 1 1 *".into());
    }
    vars.insert("SCHEDULE_QUEUE_UPKEEP".into(), "* * * * * *".into());
    vars.insert("SCHEDULER_SKIP_MISSED".into(), SCHEDULED_JOBS.join(","));
    // Long enough that a renewal delayed by a loaded machine never looks like a dead pod.
    vars.insert("SCHEDULER_LEASE_MS".into(), "6000".into());
    if hang {
        vars.insert("FAULT_INJECT".into(), format!("scheduler:{JOB}:hang"));
    }
    let child = switchboard(&vars, &["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, format!("http://127.0.0.1:{port}"))
}

async fn ready(base: &str) {
    let http = switchboard_testing::http();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http
        .get(format!("{base}/ready"))
        .send()
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "{base} never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_slot_of_a_pod_killed_mid_run_is_retried_once_by_another_pod() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let (mut a, base_a) = start(&db, &prefix, "pod-a", true);
    let (mut b, base_b) = start(&db, &prefix, "pod-b", false);
    let (mut c, base_c) = start(&db, &prefix, "pod-c", false);
    for base in [&base_a, &base_b, &base_c] {
        ready(base).await;
    }
    let pool = db.pool().await;
    // Wait until pod A wins a slot: its run hangs there, holding (and renewing) its lease.
    let deadline = Instant::now() + Duration::from_secs(30);
    let slot: chrono::DateTime<chrono::Utc> = loop {
        let slot = sqlx::query_scalar(
            "SELECT slot FROM cron_runs WHERE job = $1 AND pod_id LIKE 'pod-a-%' AND status = 'running'",
        )
        .bind(JOB)
        .fetch_optional(&pool)
        .await
        .unwrap();
        if let Some(slot) = slot {
            break slot;
        }
        if Instant::now() >= deadline {
            let runs: Vec<String> = sqlx::query_scalar(
                "SELECT concat_ws(' ', slot, status, attempt, pod_id, previous_pod)
                 FROM cron_runs WHERE job = $1 ORDER BY slot",
            )
            .bind(JOB)
            .fetch_all(&pool)
            .await
            .unwrap();
            panic!("pod A never held a running slot; runs: {runs:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Its lease is renewed while it hangs: the run is alive and nobody takes it over.
    let lease = "SELECT lease_until, status, attempt FROM cron_runs WHERE job = $1 AND slot = $2";
    let (first, _, _): (chrono::DateTime<chrono::Utc>, String, i16) = sqlx::query_as(lease)
        .bind(JOB)
        .bind(slot)
        .fetch_one(&pool)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (until, status, attempt): (chrono::DateTime<chrono::Utc>, String, i16) =
            sqlx::query_as(lease)
                .bind(JOB)
                .bind(slot)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((status.as_str(), attempt), ("running", 1));
        if until > first {
            break;
        }
        assert!(Instant::now() < deadline, "the lease was never renewed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    a.kill().unwrap();
    a.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (status, attempt, pod, previous): (String, i16, String, Option<String>) = loop {
        let row: (String, i16, String, Option<String>) = sqlx::query_as(
            "SELECT status, attempt, pod_id, previous_pod FROM cron_runs WHERE job = $1 AND slot = $2",
        )
        .bind(JOB)
        .bind(slot)
        .fetch_one(&pool)
        .await
        .unwrap();
        if row.0 != "running" {
            break row;
        }
        assert!(Instant::now() < deadline, "the slot was never retried");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, "ok");
    assert_eq!(attempt, 2, "retried once");
    assert!(previous.unwrap_or_default().starts_with("pod-a-"));
    assert!(
        pod.starts_with("pod-b-") || pod.starts_with("pod-c-"),
        "{pod}"
    );
    // The other slots went on being run once each by the survivors.
    let later = sqlx::query_scalar::<_, i64>(
        "SELECT count(*) FROM cron_runs WHERE job = $1 AND slot > $2 AND status = 'ok' AND attempt = 1",
    )
    .bind(JOB)
    .bind(slot)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(later >= 2, "{later}");
    for child in [&mut b, &mut c] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    pool.close().await;
}
