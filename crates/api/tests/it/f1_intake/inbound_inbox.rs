//! The inbox in Postgres, which the sweeper reads: a running job keeps its event by renewing
//! its lease, the sweeper keeps a day of its own slot records, and a claim goes through the
//! primary key however stale the statistics.

use serde_json::json;
use std::time::Duration;
use switchboard_testing::fakes::agent_answering;
use switchboard_testing::signing::{TELEGRAM_SECRET, telegram};
use switchboard_testing::{TestApp, TestDb, settled};
use wiremock::ResponseTemplate;

/// The sweeper keeps a day of its own slot records and leaves other jobs' records alone.
#[tokio::test]
async fn sweeper_prunes_its_old_slot_records() {
    let db = TestDb::fresh().await;
    sqlx::query(
        "INSERT INTO cron_runs (job, slot, pod_id, status) VALUES
           ('inbox-sweeper', now() - interval '2 days', 'gone-pod', 'ok'),
           ('inbox-sweeper', now() - interval '1 hour', 'gone-pod', 'ok'),
           ('other-job', now() - interval '2 days', 'gone-pod', 'ok')",
    )
    .execute(&db.pool().await)
    .await
    .unwrap();
    let app = TestApp::builder().db(db).fake_agent().build().await;
    let db = &app.db;
    let old = "SELECT count(*) FROM cron_runs WHERE job = 'inbox-sweeper' AND slot < now() - interval '1 day'";
    let left = settled(Duration::from_secs(10), || db.count(old), |n| *n == 0).await;
    assert_eq!(left, 0, "two-day-old sweeper slots are pruned");
    let kept = "SELECT count(*) FROM cron_runs WHERE pod_id = 'gone-pod'";
    assert_eq!(db.count(kept).await, 2, "recent slots and other jobs stay");
}

/// An agent slower than the inbox lease does not get the event handed to a second worker:
/// the running job renews its lease, so the agent is asked once.
#[tokio::test]
async fn a_job_slower_than_its_lease_keeps_its_event() {
    let agent = agent_answering(
        ResponseTemplate::new(200)
            .set_delay(Duration::from_secs(5))
            .set_body_json(json!({"reply": "slow", "confidence": 0.5, "cost_usd": 0.0})),
    )
    .await;
    // The sweeper looks every 300 ms for events older than 1 s whose lease (2 s) lapsed.
    let app = TestApp::builder()
        .agent(agent)
        .env("INBOX_LEASE_SECS", "2")
        .build()
        .await;
    let (p, db) = (app.pod(0), &app.db);
    let path = app.org().await.webhook("telegram");
    let (status, body) = p
        .send_webhook(&path, &telegram(TELEGRAM_SECRET, 77, 77, "slow"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 1).await, 1);
    // Two more sweeps: had the event been handed over, a second run would have reached the
    // agent by then (and the sweeper would have counted the push).
    assert!(db.wait_for_job_runs("inbox-sweeper", 2).await >= 2);
    let asked = app
        .agent()
        .received_requests()
        .await
        .unwrap_or_default()
        .len();
    assert_eq!(asked, 1, "the agent was asked once");
    let requeued = db.count("SELECT coalesce(sum((detail->>'pushed')::int), 0) FROM cron_runs WHERE job = 'inbox-sweeper'").await;
    assert_eq!(requeued, 0, "the sweeper never saw the event as abandoned");
}

/// Statistics lag a burst: the planner must still claim an event through the primary key,
/// never by scanning the sweeper's index of every unprocessed event.
#[tokio::test]
async fn a_claim_uses_the_primary_key_while_statistics_lag_a_backlog() {
    let app = TestApp::builder().build().await;
    let org = app.org().await;
    let slack = org.conns["slack"];
    let pool = app.db.pool().await;
    // Vacuumed while everything was processed (the sweeper's index empty), then a backlog
    // arrives before autovacuum looks again.
    let insert = |processed: bool, from: i32| {
        sqlx::query(
            "INSERT INTO inbound_events (org_id, connection_id, channel, dedup_key, payload,
                                         processed_at)
             SELECT $1, $2, 'slack', 'ev-' || i, '{}', CASE WHEN $3 THEN now() END
             FROM generate_series($4, $4 + 19999) i",
        )
        .bind(org.id)
        .bind(slack)
        .bind(processed)
        .bind(from)
    };
    insert(true, 0).execute(&pool).await.unwrap();
    sqlx::query("VACUUM ANALYZE inbound_events")
        .execute(&pool)
        .await
        .unwrap();
    insert(false, 20000).execute(&pool).await.unwrap();
    let plan: Vec<String> =
        sqlx::query_scalar(&format!("EXPLAIN {}", *switchboard_store::inbox::CLAIM))
            .bind(vec![uuid::Uuid::new_v4(), uuid::Uuid::new_v4()])
            .bind(30.0_f64)
            .bind("pod-t")
            .fetch_all(&pool)
            .await
            .unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("inbound_events_pkey"), "{plan}");
}
