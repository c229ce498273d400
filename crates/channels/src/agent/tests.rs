//! The agent's answer is read up to [`AGENT_ANSWER_CAP`]; past it the draft fails like any
//! other agent error (and the inbound job stores its fallback draft).

use super::fake_upstream::{Answer, serve};
use super::{AGENT_ANSWER_CAP, AgentClient, AgentError, Draft};
use serde_json::json;
use std::time::Duration;
use switchboard_config::{AgentMode, RedisTls};
use switchboard_coord::Redis;
use switchboard_coord::breaker::{Breaker, BreakerConfig};
use url::Url;
use uuid::Uuid;

/// A Switchboard-contract client of the agent at `url`. Its breaker's Redis is an address
/// nothing listens on: a breaker Redis that cannot answer counts as closed.
fn client(url: &str) -> AgentClient {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let redis_url = format!("redis://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let redis = Redis::connect_lazy(&redis_url, &RedisTls::Off, "agent-test").expect("redis");
    AgentClient {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .expect("client"),
        url: Some(Url::parse(url).expect("url")),
        mode: AgentMode::Switchboard,
        api_key: None,
        model: "test".into(),
        breaker: Breaker::new(redis, "agent", BreakerConfig::default()),
    }
}

/// The draft for a one-line conversation, within a deadline far below the client's timeout,
/// so a reader that waits for a whole oversized answer fails here instead of passing late.
async fn draft(url: &str) -> Result<Draft, AgentError> {
    let history = [super::ChatLine {
        role: switchboard_domain::Author::Customer,
        text: "Where is my order?".into(),
    }];
    let client = client(url);
    let call = client.draft(Uuid::nil(), Uuid::nil(), &history);
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the cap ends the read")
}

/// A contract answer whose reply makes its JSON `size` bytes long.
fn reply_of_size(size: usize) -> Vec<u8> {
    let empty = json!({"reply": "", "confidence": 0.5}).to_string().len();
    json!({"reply": "x".repeat(size - empty), "confidence": 0.5})
        .to_string()
        .into_bytes()
}

fn failure(result: Result<Draft, AgentError>) -> String {
    match result {
        Err(AgentError::Failed(reason)) => reason.to_string(),
        other => panic!("expected AgentError::Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn an_oversized_answer_fails_the_draft_without_a_retry() {
    let agent = serve(Answer::Sized(reply_of_size(2 * AGENT_ANSWER_CAP))).await;
    let reason = failure(draft(&agent.url).await);
    assert_eq!(
        reason,
        "unreadable agent answer: the answer is larger than the 1 MiB cap"
    );
    // The same agent would send the same answer again.
    assert_eq!(agent.requests(), 1);
}

#[tokio::test]
async fn an_undeclared_oversized_answer_is_cut_off() {
    let agent = serve(Answer::Chunked(2 * AGENT_ANSWER_CAP)).await;
    assert!(failure(draft(&agent.url).await).ends_with("1 MiB cap"));
    let agent = serve(Answer::Endless).await;
    assert!(failure(draft(&agent.url).await).ends_with("1 MiB cap"));
}

#[tokio::test]
async fn answers_within_the_cap_are_drafts() {
    let answer = json!({"reply": "It ships today.", "confidence": 0.75, "cost_usd": 0.002});
    let agent = serve(Answer::Sized(answer.to_string().into_bytes())).await;
    let got = draft(&agent.url).await.expect("draft");
    let want = Draft {
        reply: "It ships today.".into(),
        confidence: Some(0.75),
        cost_usd: Some(0.002),
    };
    assert_eq!(got, want);
    let agent = serve(Answer::Sized(reply_of_size(AGENT_ANSWER_CAP))).await;
    let got = draft(&agent.url).await.expect("draft at the cap");
    assert!(
        got.reply.len() > AGENT_ANSWER_CAP - 64,
        "{}",
        got.reply.len()
    );
}
