//! The scheduler across pods (AA2): every job once per slot with three pods on one-second
//! schedules, snoozed items resurfacing exactly once, and reports in the org's time zone.

use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use switchboard_config::SCHEDULED_JOBS;
use switchboard_domain::Role;
use switchboard_testing::{TestDb, TestPod, random_prefix, redis_url, seed_member};
use uuid::Uuid;

/// Every job on `schedule`, plus `extra`.
fn schedules(schedule: &str) -> impl Fn(&mut HashMap<String, String>) + Clone + '_ {
    move |v: &mut HashMap<String, String>| {
        for job in SCHEDULED_JOBS {
            let var = format!("SCHEDULE_{}", job.to_ascii_uppercase().replace('-', "_"));
            v.insert(var, schedule.to_owned());
        }
        v.insert("SCHEDULER_LEASE_MS".into(), "3000".into());
    }
}

async fn pods(
    db: &TestDb,
    n: usize,
    tweak: impl Fn(&mut HashMap<String, String>) + Clone,
) -> Vec<TestPod> {
    let prefix = random_prefix();
    let mut pods = Vec::new();
    for _ in 0..n {
        pods.push(TestPod::start_with(db, &redis_url(), &prefix, tweak.clone()).await);
    }
    pods
}

async fn stop(pods: Vec<TestPod>) {
    for p in &pods {
        p.server.begin_shutdown();
    }
    for p in pods {
        let _ = p.server.wait().await;
    }
}

async fn connection(db: &TestDb, org: Uuid) -> Uuid {
    let pool = db.pool().await;
    let id = sqlx::query_scalar(
        "INSERT INTO channel_connections (org_id, channel, name, secrets_ciphertext)
         VALUES ($1, 'slack', 's', '\\x00') RETURNING id",
    )
    .bind(org)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    id
}

#[tokio::test]
async fn three_pods_on_one_second_schedules_run_every_job_once_per_slot() {
    let db = TestDb::fresh().await;
    // The reports run per org zone: two orgs in two zones.
    let (org, _, _) = seed_member(&db, None, Role::Admin).await;
    let (other, _, _) = seed_member(&db, None, Role::Admin).await;
    let pool = db.pool().await;
    sqlx::query("UPDATE orgs SET time_zone = 'Asia/Tokyo' WHERE id = $1")
        .bind(other)
        .execute(&pool)
        .await
        .unwrap();
    let started = chrono::Utc::now();
    let pods = pods(&db, 3, schedules("* * * * * *")).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop(pods).await;
    // Whole seconds well inside the run, so no slot is cut by start-up or shutdown.
    let from = started + chrono::Duration::seconds(2);
    let to = started + chrono::Duration::seconds(9);
    let expected = to.timestamp() - from.timestamp();
    let mut by_pod: HashMap<String, i64> = HashMap::new();
    for job in SCHEDULED_JOBS {
        let rows: Vec<(chrono::DateTime<chrono::Utc>, String, String, i16)> = sqlx::query_as(
            "SELECT slot, status, pod_id, attempt FROM cron_runs
             WHERE job = $1 AND slot > $2 AND slot <= $3 ORDER BY slot",
        )
        .bind(job)
        .bind(from)
        .bind(to)
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(
            rows.len() as i64,
            expected,
            "{job}: one run per slot, none skipped: {rows:?}"
        );
        for w in rows.windows(2) {
            assert_eq!(
                (w[1].0 - w[0].0).num_seconds(),
                1,
                "{job}: consecutive slots"
            );
        }
        for (slot, status, pod, attempt) in rows {
            assert_eq!(status, "ok", "{job} at {slot}");
            assert_eq!(attempt, 1);
            *by_pod.entry(pod).or_default() += 1;
        }
    }
    assert!(by_pod.len() >= 2, "the pods share the slots: {by_pod:?}");
    // Daily and weekly reports: one per org and period however many slots ran (AA3), in
    // each org's zone. A review summary is a snapshot: one per org and slot.
    let reports: Vec<(Uuid, String, String)> = sqlx::query_as(
        "SELECT org_id, kind, time_zone FROM reports WHERE kind <> 'review_summary' ORDER BY org_id, kind",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(reports.len(), 4, "{reports:?}");
    assert!(reports.iter().any(|r| r.0 == other && r.2 == "Asia/Tokyo"));
    assert!(reports.iter().any(|r| r.0 == org && r.2 == "UTC"));
    let reviews = db
        .count("SELECT count(*) FROM reports WHERE kind = 'review_summary'")
        .await;
    let review_runs = db
        .count("SELECT count(*) FROM cron_runs WHERE job = 'review-summary' AND status = 'ok'")
        .await;
    assert_eq!(reviews, 2 * review_runs);
    pool.close().await;
}

#[tokio::test]
async fn a_snoozed_item_comes_due_once_with_three_pods() {
    let db = TestDb::fresh().await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let conn = connection(&db, org).await;
    let items = switchboard_testing::seed_queue_items(&db, org, conn, 2).await;
    let pool = db.pool().await;
    // One due in a moment, one far in the future.
    sqlx::query(
        "UPDATE expert_queue SET status = 'snoozed',
           snoozed_until = CASE WHEN id = $1 THEN now() + interval '1500 ms' ELSE now() + interval '1 day' END
         WHERE id = ANY($2)",
    )
    .bind(items[0])
    .bind(&items)
    .execute(&pool)
    .await
    .unwrap();
    let only_snooze = |v: &mut HashMap<String, String>| {
        schedules("0 0 0 1 1 *")(v);
        v.insert("SCHEDULE_SNOOZE_RESURFACE".into(), "* * * * * *".into());
        v.insert("SCHEDULER_SKIP_MISSED".into(), SCHEDULED_JOBS.join(","));
    };
    let pods = pods(&db, 3, only_snooze).await;
    let pending = format!(
        "SELECT count(*) FROM expert_queue WHERE id = '{}' AND status = 'pending' AND snoozed_until IS NULL",
        items[0]
    );
    assert_eq!(db.wait_for_count(&pending, 1).await, 1);
    // Two more slots after that one: still one event, and the other item still snoozed.
    let resurfaced_at: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT updated_at FROM expert_queue WHERE id = $1")
            .bind(items[0])
            .fetch_one(&pool)
            .await
            .unwrap();
    let later = format!(
        "SELECT count(*) FROM cron_runs WHERE job = 'snooze-resurface' AND status = 'ok'
         AND slot > '{}'::timestamptz + interval '1 second'",
        resurfaced_at.to_rfc3339()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.count(&later).await < 2 {
        assert!(Instant::now() < deadline, "no later slots ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = format!(
        "SELECT (SELECT count(*) FROM events WHERE event = 'queue_item_updated' AND payload->>'id' = '{0}')
              + (SELECT count(*) FROM event_outbox WHERE event = 'queue_item_updated' AND payload->>'id' = '{0}')",
        items[0]
    );
    assert_eq!(db.count(&events).await, 1, "emitted exactly once");
    let version: i32 = sqlx::query_scalar("SELECT version FROM expert_queue WHERE id = $1")
        .bind(items[0])
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(version, 2, "one transition");
    let still = format!(
        "SELECT count(*) FROM expert_queue WHERE id = '{}' AND status = 'snoozed'",
        items[1]
    );
    assert_eq!(db.count(&still).await, 1);

    // The event reached the realtime log with the item's new state.
    let delivered = format!(
        "SELECT count(*) FROM events WHERE event = 'queue_item_updated' AND payload->>'id' = '{}' AND payload->>'status' = 'pending'",
        items[0]
    );
    assert_eq!(db.wait_for_count(&delivered, 1).await, 1);
    let token = pods[0].login(&email, &password).await;
    let r = pods[1]
        .client
        .get(pods[1].url(&format!("/reports?org_id={org}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["items"].as_array().unwrap().is_empty(),
        "no report job ran: {body}"
    );
    pool.close().await;
    stop(pods).await;
}

#[tokio::test]
async fn reports_follow_the_org_time_zone_and_are_listed_with_an_event() {
    let db = TestDb::fresh().await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let no_jobs = |v: &mut HashMap<String, String>| {
        schedules("0 0 0 1 1 *")(v);
        v.insert("SCHEDULER_SKIP_MISSED".into(), SCHEDULED_JOBS.join(","));
    };
    let pod = TestPod::start_with(&db, &redis_url(), &random_prefix(), no_jobs).await;
    let token = pod.login(&email, &password).await;
    let set = |tz: &str| {
        pod.client
            .patch(pod.url(&format!("/orgs/{org}/settings")))
            .bearer_auth(&token)
            .json(&serde_json::json!({"time_zone": tz}))
            .send()
    };
    assert_eq!(set("Mars/Olympus").await.unwrap().status(), 422);
    let r = set("Europe/Berlin").await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["time_zone"], "Europe/Berlin");
    stop(vec![pod]).await;

    // The daily summary on a one-second schedule, read in Berlin.
    let daily = |v: &mut HashMap<String, String>| {
        schedules("0 0 0 1 1 *")(v);
        v.insert("SCHEDULE_DAILY_SUMMARY".into(), "* * * * * *".into());
        v.insert("SCHEDULER_SKIP_MISSED".into(), SCHEDULED_JOBS.join(","));
    };
    let pod = TestPod::start_with(&db, &redis_url(), &random_prefix(), daily).await;
    let ready = "SELECT count(*) FROM events WHERE event = 'report_ready'";
    assert_eq!(db.wait_for_count(ready, 1).await, 1);
    let r = pod
        .client
        .get(pod.url("/reports?kind=daily_summary"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{body}");
    let report = &items[0];
    assert_eq!(report["time_zone"], "Europe/Berlin");
    assert_eq!(report["data"]["messages_in"], 0);
    // The period is yesterday in Berlin: from local midnight to local midnight.
    let start =
        chrono::DateTime::parse_from_rfc3339(report["period_start"].as_str().unwrap()).unwrap();
    let berlin: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
    let local = start.with_timezone(&berlin);
    assert_eq!(local.format("%H:%M").to_string(), "00:00");
    let r = pod
        .client
        .get(pod.url("/reports?kind=nonsense"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    stop(vec![pod]).await;
}
