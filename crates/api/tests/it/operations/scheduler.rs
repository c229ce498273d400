//! The scheduler across pods (AA2): every job once per slot with three pods on one-second
//! schedules, snoozed items resurfacing exactly once, reports in the org's time zone, and a
//! run history that a job on a schedule of seconds does not grow without bound.

use serde_json::Value;
use std::collections::HashMap;
use switchboard_config::SCHEDULED_JOBS;
use switchboard_domain::Role;
use switchboard_testing::{TestApp, TestAppBuilder, TestDb, seed_member};
use uuid::Uuid;

/// Every job on `schedule` (a one-second lease so a run is renewed often).
fn every_job_on(schedule: &str) -> TestAppBuilder {
    let schedules = SCHEDULED_JOBS.iter().map(|job| {
        let var = format!("SCHEDULE_{}", job.to_ascii_uppercase().replace('-', "_"));
        (var, schedule.to_owned())
    });
    TestApp::builder()
        .envs(schedules)
        .env("SCHEDULER_LEASE_MS", "3000")
}

/// Every job off (a slot on the first of January) but `job`, which runs every second.
fn only_every_second(job: &str) -> TestAppBuilder {
    let var = format!("SCHEDULE_{}", job.to_ascii_uppercase().replace('-', "_"));
    every_job_on("0 0 0 1 1 *")
        .env(&var, "* * * * * *")
        .env("SCHEDULER_SKIP_MISSED", &SCHEDULED_JOBS.join(","))
}

/// A Slack connection sealed with the test key, as the pods will read it at start.
async fn connection(db: &TestDb, org: Uuid) -> Uuid {
    use base64::Engine;
    let key: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(switchboard_testing::MASTER_KEY)
        .unwrap()
        .try_into()
        .unwrap();
    let pool = db.pool().await;
    let secrets = serde_json::json!({"signing_secret": "s", "bot_token": "xoxb-1"});
    let new = switchboard_store::connections::NewConnection {
        org_id: org,
        channel: switchboard_domain::ChannelKind::Slack,
        name: "s",
        secrets: &secrets,
        settings: &serde_json::json!({}),
    };
    let cipher = switchboard_store::crypto::SecretCipher::new(&key);
    let id = switchboard_store::connections::create(&pool, &cipher, new)
        .await
        .unwrap()
        .id;
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
    let app = every_job_on("* * * * * *").pods(3).db(db).build().await;
    // Whole seconds well inside the run, so no slot is cut by start-up or shutdown: the
    // pods stop once every job has run a slot a second past the last of them.
    let from = started + chrono::Duration::seconds(2);
    let to = started + chrono::Duration::seconds(9);
    let done = format!(
        "SELECT count(DISTINCT job) FROM cron_runs WHERE slot >= '{}'::timestamptz
           AND status <> 'running'",
        (to + chrono::Duration::seconds(1)).to_rfc3339()
    );
    let jobs = SCHEDULED_JOBS.len() as i64;
    assert_eq!(app.db.wait_for_count(&done, jobs).await, jobs);
    let db = app.stop().await;
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
    let app = only_every_second("snooze-resurface")
        .pods(3)
        .db(db)
        .build()
        .await;
    let db = &app.db;
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
    assert!(
        db.wait_for_at_least(&later, 2).await >= 2,
        "no later slots ran"
    );
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
    let token = app.pod(0).login(&email, &password).await;
    let (status, body) = app
        .pod(1)
        .as_user(&token)
        .get(&format!("/reports?org_id={org}"))
        .await;
    assert_eq!(status, 200);
    assert!(
        body["items"].as_array().unwrap().is_empty(),
        "no report job ran: {body}"
    );
    pool.close().await;
    app.stop().await;
}

/// `autopilot-send` runs every 2 s: `scheduler-prune` keeps its newest
/// `SCHEDULER_HISTORY_RUNS` successful runs rather than a day of them (43 200), keeps its
/// failures for the whole history, and leaves a job with fewer runs alone.
#[tokio::test]
async fn pruning_keeps_a_frequent_jobs_newest_runs_and_its_failures() {
    let db = TestDb::fresh().await;
    let pool = db.pool().await;
    let now: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT date_trunc('second', now())")
            .fetch_one(&pool)
            .await
            .expect("now");
    // 3 000 runs two seconds apart (the last 100 minutes), a failure older than all of them
    // but inside the history, one past the history, and 100 runs of a per-minute job.
    sqlx::query(
        "INSERT INTO cron_runs (job, slot, pod_id, status)
         SELECT 'autopilot-send', $1 - make_interval(secs => 2 * k), 'gone-pod', 'ok'
           FROM generate_series(1, 3000) k
         UNION ALL VALUES ('autopilot-send', $1 - interval '3 hours', 'gone-pod', 'failed'),
                          ('autopilot-send', $1 - interval '2 days', 'gone-pod', 'failed')
         UNION ALL
         SELECT 'snooze-resurface', $1 - make_interval(mins => k), 'gone-pod', 'ok'
           FROM generate_series(1, 100) k",
    )
    .bind(now)
    .execute(&pool)
    .await
    .expect("seed runs");
    pool.close().await;
    let app = only_every_second("scheduler-prune")
        .env("SCHEDULER_HISTORY_RUNS", "1000")
        .db(db)
        .build()
        .await;
    let db = &app.db;
    let ok = "SELECT count(*) FROM cron_runs WHERE job = 'autopilot-send' AND status = 'ok'";
    assert_eq!(db.wait_for_count(ok, 1000).await, 1000);
    let (newest, oldest): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) = {
        let pool = db.pool().await;
        let range = sqlx::query_as(
            "SELECT max(slot), min(slot) FROM cron_runs WHERE job = 'autopilot-send' AND status = 'ok'",
        )
        .fetch_one(&pool)
        .await
        .expect("kept runs");
        pool.close().await;
        range
    };
    assert_eq!(
        newest,
        now - chrono::Duration::seconds(2),
        "the newest run is kept"
    );
    assert_eq!(
        oldest,
        now - chrono::Duration::seconds(2000),
        "and the 999 before it"
    );
    let failures =
        "SELECT count(*) FROM cron_runs WHERE job = 'autopilot-send' AND status = 'failed'";
    assert_eq!(
        db.count(failures).await,
        1,
        "a failure inside the history stays"
    );
    let minutely = "SELECT count(*) FROM cron_runs WHERE job = 'snooze-resurface'";
    assert_eq!(
        db.count(minutely).await,
        100,
        "a job under the cap keeps its history"
    );
    // One run deleted the 2 000 extra runs and the old failure; later runs delete nothing.
    assert!(db.wait_for_job_runs("scheduler-prune", 2).await >= 2);
    assert_eq!(db.count(ok).await, 1000);
    let deleted: i64 = db
        .scalar(
            "SELECT max((detail->>'runs_deleted')::bigint) FROM cron_runs
             WHERE job = 'scheduler-prune' AND status = 'ok'",
        )
        .await;
    assert_eq!(deleted, 2001);
    app.stop().await;
}

#[tokio::test]
async fn reports_follow_the_org_time_zone_and_are_listed_with_an_event() {
    let db = TestDb::fresh().await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let app = every_job_on("0 0 0 1 1 *")
        .env("SCHEDULER_SKIP_MISSED", &SCHEDULED_JOBS.join(","))
        .db(db)
        .build()
        .await;
    let token = app.pod(0).login(&email, &password).await;
    let settings = format!("/orgs/{org}/settings");
    let set = |tz: &str| {
        app.pod(0)
            .as_user(&token)
            .request(reqwest::Method::PATCH, &settings)
            .json(&serde_json::json!({"time_zone": tz}))
            .send()
    };
    assert_eq!(set("Mars/Olympus").await.unwrap().status(), 422);
    let r = set("Europe/Berlin").await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["time_zone"], "Europe/Berlin");
    let db = app.stop().await;

    // The daily summary on a one-second schedule, read in Berlin.
    let app = only_every_second("daily-summary").db(db).build().await;
    let ready = "SELECT count(*) FROM events WHERE event = 'report_ready'";
    assert_eq!(app.db.wait_for_count(ready, 1).await, 1);
    let user = app.pod(0).as_user(&token);
    let (_, body) = user.get("/reports?kind=daily_summary").await;
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
    assert_eq!(user.get("/reports?kind=nonsense").await.0, 422);
    app.stop().await;
}
