//! A randomized run of what the expert-integrity rules guard against (SPEC §11): one
//! customer writing (fast and slow drafts) while two experts on two pods claim, release
//! (with and without a body, with and without `If-Match`) and reopen. The seed fixes each
//! actor's sequence of operations; how they interleave is up to the machine. Set
//! `SB_TEST_SEED` to replay a seed; a failure prints it with the history.
//!
//! Invariants, checked once every draft has landed:
//! - no draft is sent twice;
//! - a release without a body sends the draft of the conversation's latest customer message
//!   at that moment (the message its reply records as answered);
//! - every customer message is followed by a released reply, or its item is pending or
//!   claimed.

use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_domain::Role;
use switchboard_testing::fakes::{agent_responding, newest_customer_line};
use switchboard_testing::signing::{SLACK_SECRET, slack};
use switchboard_testing::{TestApp, TestPod};
use uuid::Uuid;
use wiremock::{Request, Respond, ResponseTemplate};

/// A small deterministic generator (xorshift64*), so a seed replays the same operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The agent: drafts "Draft for: <the customer's message>", slowly for messages marked
/// `[slow]`, so every draft names the message it answers.
struct Drafter;

impl Respond for Drafter {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let text = newest_customer_line(request).unwrap_or_else(|| "?".to_owned());
        let delay = if text.contains("[slow]") {
            Duration::from_millis(1500)
        } else {
            Duration::from_millis(20)
        };
        ResponseTemplate::new(200).set_delay(delay).set_body_json(
            json!({"reply": format!("Draft for: {text}"), "confidence": 0.9, "cost_usd": 0}),
        )
    }
}

/// What happened, for the failure message.
type History = Arc<Mutex<Vec<String>>>;

fn note(history: &History, line: String) {
    history.lock().expect("history").push(line);
}

async fn customer(a: &TestPod, path: &str, seed: u64, history: History) {
    let mut rng = Rng(seed ^ 0xC0FFEE);
    for n in 0..12 {
        let slow = rng.below(3) == 0;
        let text = format!("message {n}{}", if slow { " [slow]" } else { "" });
        let ts = format!("1700000100.{n:06}");
        let signed = slack(SLACK_SECRET, &format!("EvR{n}"), "U1", &ts, &text);
        let (status, _) = a.send_webhook(path, &signed).await;
        note(&history, format!("customer: {text} -> {status}"));
        tokio::time::sleep(Duration::from_millis(rng.below(400))).await;
    }
}

async fn expert(pod: &TestPod, token: &str, name: &str, seed: u64, history: History) {
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(8);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(rng.below(250))).await;
        let (_, list) = pod.as_user(token).get("/expert-queue?status=all").await;
        let Some(item) = list["items"].as_array().and_then(|i| i.first()).cloned() else {
            continue;
        };
        let id: Uuid = item["id"].as_str().expect("id").parse().expect("uuid");
        let (action, body) = match rng.below(6) {
            0 => ("claim", json!({})),
            1 | 2 => ("release", json!({})),
            // The expert's own words (an edited draft): always theirs to send.
            3 => match item["draft"]["text"].as_str() {
                Some(text) => ("release", json!({"body": format!("{text} (edited)")})),
                None => ("release", json!({"body": format!("{name} writes")})),
            },
            4 => ("reopen", json!({})),
            _ => ("unclaim", json!({})),
        };
        let if_match = rng.below(2) == 0;
        let expert = pod.as_user(token);
        let (status, answer) = if if_match {
            let tag = format!("\"{}\"", item["version"]);
            let (status, answer, _) = expert.act_if_match(id, action, body.clone(), &tag).await;
            (status, answer)
        } else {
            expert.act(id, action, body.clone()).await
        };
        assert!(status < 500, "{name} {action}: {status} {answer}");
        note(
            &history,
            format!(
                "{name}: {action} {body} if_match={} (saw v{} draft {:?}) -> {status} {}",
                if if_match { "yes" } else { "no" },
                item["version"],
                item["draft"]["text"].as_str(),
                answer["code"].as_str().unwrap_or("")
            ),
        );
    }
}

#[tokio::test]
async fn expert_randomized_interleavings_keep_the_integrity_invariants() {
    let seed = std::env::var("SB_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(Uuid::new_v4().as_u128() as u32) | 1);
    let app = TestApp::builder()
        .pods(2)
        .agent(agent_responding(Drafter).await)
        .build()
        .await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let org = app.org().await;
    let e1 = app.member(Some(org.id), Role::Expert).await;
    let e2 = app.member(Some(org.id), Role::Expert).await;
    let t1 = e1.token;
    let t2 = b.login(&e2.email, &e2.password).await;
    let slack = org.webhook("slack");
    let history: History = Arc::default();

    tokio::join!(
        customer(a, &slack, seed, history.clone()),
        expert(a, &t1, "expert-a", seed.wrapping_mul(3), history.clone()),
        expert(b, &t2, "expert-b", seed.wrapping_mul(7), history.clone()),
    );
    // Every message drafted (slow ones included).
    let drafted = db
        .wait_for_count(
            "SELECT count(*) FROM drafts",
            db.count("SELECT count(*) FROM messages WHERE direction = 'inbound'")
                .await,
        )
        .await;
    let messages = db
        .count("SELECT count(*) FROM messages WHERE direction = 'inbound'")
        .await;
    let fail = |what: &str| -> String {
        format!(
            "{what}\nseed {seed} (SB_TEST_SEED={seed} replays it)\nhistory:\n{}",
            history.lock().expect("history").join("\n")
        )
    };
    assert_eq!(
        drafted,
        messages,
        "{}",
        fail("not every message was drafted")
    );

    let pool = db.pool().await;
    // 1. No draft is sent twice.
    let twice: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT body FROM messages WHERE direction = 'outbound'
           AND body LIKE 'Draft for: %' GROUP BY body HAVING count(*) > 1) t",
    )
    .fetch_one(&pool)
    .await
    .expect("twice");
    assert_eq!(twice, 0, "{}", fail("a draft was sent twice"));
    // 2. A draft released as it was answers the latest customer message its release saw.
    let wrong: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT o.body, a.body FROM messages o LEFT JOIN messages a ON a.id = o.answers_message_id
         WHERE o.direction = 'outbound' AND o.author = 'agent'
           AND o.body <> 'Draft for: ' || COALESCE(a.body, '')",
    )
    .fetch_all(&pool)
    .await
    .expect("wrong");
    assert!(
        wrong.is_empty(),
        "{}",
        fail(&format!("drafts of older messages sent: {wrong:?}"))
    );
    // 3. Every customer message is answered, or its item waits for an expert.
    let stranded: Vec<String> = sqlx::query_scalar(
        "SELECT m.body FROM messages m
         WHERE m.direction = 'inbound'
           AND NOT EXISTS (
             SELECT 1 FROM messages o JOIN messages a ON a.id = o.answers_message_id
             WHERE o.conversation_id = m.conversation_id AND o.direction = 'outbound'
               AND (a.created_at, a.id) >= (m.created_at, m.id))
           AND NOT EXISTS (
             SELECT 1 FROM expert_queue q WHERE q.conversation_id = m.conversation_id
               AND q.status IN ('pending', 'claimed'))",
    )
    .fetch_all(&pool)
    .await
    .expect("stranded");
    pool.close().await;
    assert!(
        stranded.is_empty(),
        "{}",
        fail(&format!(
            "unanswered messages outside the pending list: {stranded:?}"
        ))
    );
    let released = history
        .lock()
        .expect("history")
        .iter()
        .filter(|l| l.contains("release") && l.contains("-> 200"))
        .count();
    println!("seed {seed}: {messages} messages, {released} releases");
}
