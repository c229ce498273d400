//! The agent behind the inbound flow: a failed call is retried into one real draft, and an
//! agent that keeps failing leaves flagged fallbacks behind a breaker every pod shares.

use serde_json::json;
use switchboard_testing::TestApp;
use switchboard_testing::fakes::{agent_answering, agent_first_then};
use switchboard_testing::signing::{SLACK_SECRET, slack};
use wiremock::ResponseTemplate;

#[tokio::test]
async fn agent_503_then_200_gives_one_real_draft() {
    let agent = agent_first_then(
        ResponseTemplate::new(503),
        ResponseTemplate::new(200)
            .set_body_json(json!({"reply": "second try", "confidence": 0.7, "cost_usd": 0.01})),
    )
    .await;
    let app = TestApp::builder().agent(agent).build().await;
    let db = &app.db;
    let org = app.org().await;
    let s = slack(SLACK_SECRET, "EvR", "U2", "1700000002.000001", "retry me");
    assert_eq!(
        app.pod(0).send_webhook(&org.webhook("slack"), &s).await.0,
        200
    );
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 1).await, 1);
    let pool = db.pool().await;
    let (body, fallback): (String, bool) = sqlx::query_as("SELECT body, fallback FROM drafts")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((body.as_str(), fallback), ("second try", false));
    assert_eq!(app.agent().received_requests().await.unwrap().len(), 2);
    let flagged: bool = sqlx::query_scalar("SELECT flagged_for_review FROM expert_queue")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!flagged);
}

#[tokio::test]
async fn agent_down_stores_a_flagged_fallback_and_the_breaker_is_shared() {
    let agent = agent_answering(ResponseTemplate::new(500)).await;
    let app = TestApp::builder().pods(2).agent(agent).build().await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let path = app.org().await.webhook("slack");
    // Five failures on pod A (different customers, so five conversations).
    for i in 0..5 {
        let s = slack(
            SLACK_SECRET,
            &format!("EvD{i}"),
            &format!("U{i}"),
            &format!("1700000003.{i:06}"),
            "anyone?",
        );
        assert_eq!(a.send_webhook(&path, &s).await.0, 200);
        assert_eq!(
            db.wait_for_count("SELECT count(*) FROM drafts", i + 1)
                .await,
            i + 1
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM drafts WHERE fallback").await,
        5
    );
    assert_eq!(
        db.count("SELECT count(*) FROM expert_queue WHERE flagged_for_review")
            .await,
        5
    );
    assert!(
        b.server
            .state()
            .flows
            .agent
            .breaker()
            .is_open()
            .await
            .unwrap(),
        "B sees A's open breaker"
    );
    let calls = app.agent().received_requests().await.unwrap().len();
    // Pod B no longer calls the agent while the breaker is open.
    let s = slack(
        SLACK_SECRET,
        "EvD9",
        "U9",
        "1700000003.000009",
        "still there?",
    );
    assert_eq!(b.send_webhook(&path, &s).await.0, 200);
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 6).await, 6);
    assert_eq!(app.agent().received_requests().await.unwrap().len(), calls);
}
