use crate::serve_ready;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use switchboard_domain::Role;
use switchboard_testing::signing::{self, secrets};
use switchboard_testing::{
    TestDb, TestPod, free_port, pod_env, random_prefix, redis_url, seed_member,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// kill -9 of the pod holding a job mid-flight: another pod finishes the event once.
#[tokio::test]
async fn a_pod_killed_mid_job_still_gets_the_message_processed_exactly_once() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let agent = MockServer::start().await;
    // The first call hangs (the job is in flight when the pod dies); later calls answer.
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(30))
                .set_body_json(json!({"reply": "too late", "confidence": 0.1, "cost_usd": 0})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&agent)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"reply": "done", "confidence": 0.8, "cost_usd": 0})),
        )
        .with_priority(2)
        .mount(&agent)
        .await;

    let port = free_port();
    let mut vars = pod_env(&db, &redis_url(), &prefix);
    vars.insert("PORT".into(), port.to_string());
    vars.insert("AGENT_URL".into(), agent.uri());
    // Pod A never sweeps within this test, so recovery is pod B's doing.
    vars.insert("INBOX_SWEEP_INTERVAL_MS".into(), "3600000".into());
    // Its lease on the event outlives it by 2 s only.
    vars.insert("INBOX_LEASE_SECS".into(), "2".into());
    let (mut child, base) = serve_ready(&vars).await;
    let http = switchboard_testing::http();

    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token: Value = http
        .post(format!("{base}/auth/login"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let conn: Value = http
        .post(format!("{base}/channel-connections"))
        .bearer_auth(token["token"].as_str().unwrap())
        .json(&json!({"org_id": org, "channel": "slack", "name": "s", "secrets": secrets("slack")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let signed = signing::slack(
        "slack-signing-secret",
        "EvKill",
        "U1",
        "1700000009.000001",
        "are you there?",
    );
    let mut req = http
        .post(format!(
            "{base}/webhooks/slack/{}",
            conn["id"].as_str().unwrap()
        ))
        .body(signed.body.clone());
    for (k, v) in &signed.headers {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), 200);

    // Wait until pod A's job is waiting on the agent, then kill -9.
    let deadline = Instant::now() + Duration::from_secs(20);
    while agent.received_requests().await.unwrap().is_empty() {
        assert!(Instant::now() < deadline, "job never reached the agent");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 0);

    // Pod B: same Postgres and Redis; its sweeper finds the unprocessed event.
    let agent_url = agent.uri();
    let _b = TestPod::start_with(&db, &redis_url(), &prefix, move |v| {
        v.insert("AGENT_URL".into(), agent_url);
        v.insert("INBOX_GRACE_SECS".into(), "1".into());
        v.insert("INBOX_SWEEP_INTERVAL_MS".into(), "300".into());
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.count("SELECT count(*) FROM drafts").await == 0 {
        assert!(Instant::now() < deadline, "event was never recovered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM expert_queue").await, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM inbound_events WHERE processed_at IS NULL")
            .await,
        0
    );
}
