//! kill -9 of the pod running a scheduled job: another pod retries that slot, once.

use crate::{process_env, serve_ready, sigkill};
use std::process::Child;
use std::time::Duration;
use switchboard_config::SCHEDULED_JOBS;
use switchboard_testing::{TestDb, random_prefix, settled, try_eventually};

const JOB: &str = "queue-upkeep";

/// Pod `pod` running only [`JOB`], every second (its run hanging when `hang`), once ready.
async fn start(db: &TestDb, prefix: &str, pod: &str, hang: bool) -> Child {
    let mut vars = process_env(db, prefix);
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
    serve_ready(&vars).await.0
}

#[tokio::test]
async fn the_slot_of_a_pod_killed_mid_run_is_retried_once_by_another_pod() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    // Pod A starts alone, so the first slot is its own (with three pods racing it could take
    // any number of slots); its run hangs there, holding (and renewing) its lease.
    let mut a = start(&db, &prefix, "pod-a", true).await;
    let pool = db.pool().await;
    let held = || async {
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
            "SELECT slot FROM cron_runs WHERE job = $1 AND pod_id LIKE 'pod-a-%' AND status = 'running'",
        )
        .bind(JOB)
        .fetch_optional(&pool)
        .await
        .unwrap()
    };
    let Some(slot) = try_eventually(Duration::from_secs(30), held).await else {
        let runs: Vec<String> = sqlx::query_scalar(
            "SELECT concat_ws(' ', slot, status, attempt, pod_id, previous_pod)
             FROM cron_runs WHERE job = $1 ORDER BY slot",
        )
        .bind(JOB)
        .fetch_all(&pool)
        .await
        .unwrap();
        panic!("pod A never held a running slot; runs: {runs:?}");
    };
    // Its lease is renewed while it hangs: the run is alive and nobody takes it over, not
    // even pods B and C, which start meanwhile and run the later slots.
    let lease = || async {
        let lease =
            "SELECT lease_until, status, attempt FROM cron_runs WHERE job = $1 AND slot = $2";
        let row: (chrono::DateTime<chrono::Utc>, String, i16) = sqlx::query_as(lease)
            .bind(JOB)
            .bind(slot)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!((row.1.as_str(), row.2), ("running", 1));
        row.0
    };
    let first = lease().await;
    let (mut b, mut c, renewed) = tokio::join!(
        start(&db, &prefix, "pod-b", false),
        start(&db, &prefix, "pod-c", false),
        settled(Duration::from_secs(10), lease, |until| *until > first),
    );
    assert!(renewed > first, "the lease was never renewed");

    sigkill(&mut a);
    let run = || async {
        let row: (String, i16, String, Option<String>) = sqlx::query_as(
            "SELECT status, attempt, pod_id, previous_pod FROM cron_runs WHERE job = $1 AND slot = $2",
        )
        .bind(JOB)
        .bind(slot)
        .fetch_one(&pool)
        .await
        .unwrap();
        row
    };
    let (status, attempt, pod, previous) =
        settled(Duration::from_secs(30), run, |row| row.0 != "running").await;
    assert_ne!(status, "running", "the slot was never retried");
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
        sigkill(child);
    }
    pool.close().await;
}
