//! Shared set-up for the webhook and inbound-flow tests.

use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::signing::{Signed, secrets};
use switchboard_testing::{TestDb, TestPod, seed_member};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// An agent that always drafts.
pub async fn agent() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"reply": "Happy to help!", "confidence": 0.9, "cost_usd": 0.002}),
        ))
        .mount(&server)
        .await;
    server
}

/// A pod wired to `agent` with a fast inbox sweeper.
pub async fn pod(db: &TestDb, redis_url: &str, prefix: &str, agent: &str) -> TestPod {
    pod_with(db, redis_url, prefix, agent, &[]).await
}

/// [`pod`] with more settings.
pub async fn pod_with(
    db: &TestDb,
    redis_url: &str,
    prefix: &str,
    agent: &str,
    extra: &[(&str, &str)],
) -> TestPod {
    let agent = agent.to_owned();
    let extra: Vec<(String, String)> = extra
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    TestPod::start_with(db, redis_url, prefix, move |v| {
        v.extend(extra);
        v.insert("AGENT_URL".into(), agent);
        v.insert("INBOX_GRACE_SECS".into(), "1".into());
        v.insert("INBOX_SWEEP_INTERVAL_MS".into(), "300".into());
        // Longer than any job here, short enough that a job dropped with its worker
        // (a worker restarted after a Redis error) is retried within the test.
        v.insert("INBOX_LEASE_SECS".into(), "5".into());
        // Finished jobs are vacuumed from Redis by the queue-upkeep job.
        v.insert("SCHEDULE_QUEUE_UPKEEP".into(), "@every 300ms".into());
    })
    .await
}

/// Creates an org admin and one connection per channel; returns (org, channel → id).
pub async fn connections(db: &TestDb, pod: &TestPod) -> (uuid::Uuid, Vec<(String, String)>) {
    let (org, email, password) = seed_member(db, None, Role::Admin).await;
    let token = pod.login(&email, &password).await;
    let mut out = Vec::new();
    for channel in ["slack", "whatsapp", "telegram", "email"] {
        let r: Value = pod
            .client
            .post(pod.url("/channel-connections"))
            .bearer_auth(&token)
            .json(&json!({"org_id": org, "channel": channel, "name": channel, "secrets": secrets(channel)}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        out.push((channel.to_owned(), r["id"].as_str().unwrap().to_owned()));
    }
    (org, out)
}

/// Posts a signed webhook; returns the status and body.
pub async fn send(pod: &TestPod, path: &str, signed: &Signed) -> (u16, String) {
    let mut req = pod.client.post(pod.url(path)).body(signed.body.clone());
    for (k, v) in &signed.headers {
        req = req.header(k, v);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Counts rows matching a query.
pub async fn count(db: &TestDb, sql: &str) -> i64 {
    db.count(sql).await
}

/// Polls a count until it equals `want` or 30 s pass.
pub async fn wait_for_count(db: &TestDb, sql: &str, want: i64) -> i64 {
    db.wait_for_count(sql, want).await
}
