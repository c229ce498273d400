use crate::{process_env, serve_ready, sigkill};
use serde_json::json;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::fakes::agent_first_then;
use switchboard_testing::signing::{SLACK_SECRET, slack};
use switchboard_testing::{TestApp, TestDb, eventually, random_prefix, seed_member};
use wiremock::ResponseTemplate;

/// kill -9 of the pod holding a job mid-flight: another pod finishes the event once.
#[tokio::test]
async fn a_pod_killed_mid_job_still_gets_the_message_processed_exactly_once() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    // The first call hangs (the job is in flight when the pod dies); later calls answer.
    let agent = agent_first_then(
        ResponseTemplate::new(200)
            .set_delay(Duration::from_secs(30))
            .set_body_json(json!({"reply": "too late", "confidence": 0.1, "cost_usd": 0})),
        ResponseTemplate::new(200)
            .set_body_json(json!({"reply": "done", "confidence": 0.8, "cost_usd": 0})),
    )
    .await;

    let mut vars = process_env(&db, &prefix);
    vars.insert("AGENT_URL".into(), agent.uri());
    // Pod A never sweeps within this test, so recovery is pod B's doing.
    vars.insert("INBOX_SWEEP_INTERVAL_MS".into(), "3600000".into());
    // Its lease on the event outlives it by 2 s only.
    vars.insert("INBOX_LEASE_SECS".into(), "2".into());
    let (mut child, a) = serve_ready(&vars).await;

    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = a.login(&email, &password).await;
    let conn = a.as_user(&token).create_connection(org, "slack").await;
    let signed = slack(
        SLACK_SECRET,
        "EvKill",
        "U1",
        "1700000009.000001",
        "are you there?",
    );
    let path = format!("/webhooks/slack/{conn}");
    assert_eq!(a.send_webhook(&path, &signed).await.0, 200);

    // Wait until pod A's job is waiting on the agent, then kill -9.
    let asked = || async {
        let requests = agent.received_requests().await.unwrap();
        (!requests.is_empty()).then_some(())
    };
    eventually("the job reaches the agent", Duration::from_secs(20), asked).await;
    sigkill(&mut child);
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 0);

    // Pod B: same Postgres and Redis; its sweeper finds the unprocessed event.
    let app = TestApp::builder()
        .db(db)
        .prefix(&prefix)
        .agent(agent)
        .build()
        .await;
    let db = &app.db;
    assert!(
        db.wait_for_at_least("SELECT count(*) FROM drafts", 1).await >= 1,
        "event was never recovered"
    );
    // Two more sweeps after the recovery: nothing is processed twice.
    db.wait_for_job_runs("inbox-sweeper", 2).await;
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM expert_queue").await, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM inbound_events WHERE processed_at IS NULL")
            .await,
        0
    );
}
