//! What the expert saw is what is sent (SPEC §11), on two pods with the real inbound flow:
//! `If-Match` against a draft replaced meanwhile (412), a released draft never sent twice
//! (`no_draft`), a draft that answers an older message refused (`stale_draft`), a slow draft
//! never replacing a newer one, a customer message written while the previous draft was
//! being released bringing its item back to pending, and a reopen that would make a second
//! live item answering 409 instead of 500.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::fakes::{agent_responding, newest_customer_line};
use switchboard_testing::signing::slack_message;
use switchboard_testing::{Endpoint, TestApp, TestPod, User, eventually, settled};
use uuid::Uuid;
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

/// The agent: drafts `Draft two` for a newest customer message that says "second", else
/// `Draft one`, after `second_delay` or `first_delay`. It looks at the newest customer line
/// only (the request carries the whole conversation).
struct Drafter {
    first_delay: Duration,
    second_delay: Duration,
}

impl Respond for Drafter {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let newest = newest_customer_line(request).unwrap_or_default();
        let (reply, delay) = if newest.contains("second") {
            ("Draft two", self.second_delay)
        } else {
            ("Draft one", self.first_delay)
        };
        ResponseTemplate::new(200)
            .set_delay(delay)
            .set_body_json(json!({"reply": reply, "confidence": 0.9, "cost_usd": 0}))
    }
}

async fn agent(first_delay: Duration, second_delay: Duration) -> MockServer {
    agent_responding(Drafter {
        first_delay,
        second_delay,
    })
    .await
}

/// Two pods with workers, an org's Slack connection and an expert's token (from pod B).
struct Stack {
    app: TestApp,
    slack: String,
    expert: String,
}

impl Stack {
    async fn start(agent: MockServer) -> Stack {
        let app = TestApp::builder().pods(2).agent(agent).build().await;
        let org = app.org().await;
        let member = app.member(Some(org.id), Role::Expert).await;
        let expert = app.pod(1).login(&member.email, &member.password).await;
        let slack = org.conns["slack"].to_string();
        Stack { app, slack, expert }
    }

    fn a(&self) -> &TestPod {
        self.app.pod(0)
    }

    fn b(&self) -> &TestPod {
        self.app.pod(1)
    }

    /// Customer U1 writes `text` as Slack message `ts`.
    async fn customer_writes(&self, ts: &str, text: &str) {
        let path = format!("/webhooks/slack/{}", self.slack);
        let (status, _) = self
            .a()
            .send_webhook(&path, &slack_message("U1", ts, text))
            .await;
        assert_eq!(status, 200);
    }

    /// The conversation's live item, once one exists (20 s at most).
    async fn item(&self) -> Uuid {
        let pool = self.app.db.pool().await;
        let live = || async {
            sqlx::query_scalar::<_, Uuid>("SELECT id FROM expert_queue WHERE status <> 'resolved'")
                .fetch_optional(&pool)
                .await
                .expect("item")
        };
        let id = eventually("an item is created", Duration::from_secs(20), live).await;
        pool.close().await;
        id
    }

    /// `GET /expert-queue/{item}` (on pod B) with its `ETag`.
    async fn show(&self, item: Uuid) -> (Value, String) {
        let expert = self.b().as_user(&self.expert);
        let (status, view, tag) = expert.get_tagged(&format!("/expert-queue/{item}")).await;
        assert_eq!(status, 200, "{view}");
        (view, tag.expect("ETag"))
    }

    /// Awaits the item's view satisfying `done` (20 s at most); returns it.
    async fn until(&self, item: Uuid, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let view = || async { self.show(item).await.0 };
        let view = settled(Duration::from_secs(20), view, &done).await;
        assert!(done(&view), "never {what}: {view}");
        view
    }

    /// The expert's requests on pod A.
    fn expert(&self) -> User<'_> {
        self.a().as_user(&self.expert)
    }

    async fn count(&self, sql: &str) -> i64 {
        self.app.db.count(sql).await
    }

    /// Awaits `sql` counting at least `want` (20 s at most).
    async fn at_least(&self, sql: &str, want: i64, what: &str) {
        let n = settled(Duration::from_secs(20), || self.count(sql), |n| *n >= want).await;
        assert!(n >= want, "{what}");
    }
}

fn draft_text(view: &Value) -> Option<&str> {
    view["draft"]["text"].as_str()
}

#[tokio::test]
async fn a_draft_replaced_since_the_expert_looked_is_refused_with_412_and_sent_once() {
    let s = Stack::start(agent(Duration::ZERO, Duration::ZERO).await).await;
    s.customer_writes("1700000000.000001", "first question")
        .await;
    let item = s.item().await;
    s.until(item, "drafted", |v| draft_text(v) == Some("Draft one"))
        .await;
    let (seen, seen_tag) = s.show(item).await;
    assert_eq!(seen_tag, format!("\"{}\"", seen["version"]));

    s.customer_writes("1700000000.000002", "second question")
        .await;
    s.until(item, "redrafted", |v| draft_text(v) == Some("Draft two"))
        .await;
    let (status, body, _) = s
        .expert()
        .act_if_match(item, "release", json!({}), &seen_tag)
        .await;
    assert_eq!(status, 412, "{body}");
    assert_eq!(body["code"], "precondition_failed");
    assert_eq!(body["current"]["draft"]["text"], "Draft two");
    assert_eq!(
        body["current"]["last_message"]["preview"],
        "second question"
    );
    assert_eq!(s.count("SELECT count(*) FROM outbox").await, 0);

    // Reviewed again: the current draft goes, once.
    let (_, tag) = s.show(item).await;
    let (status, body, _) = s
        .expert()
        .act_if_match(item, "release", json!({}), &tag)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"]["body"], "Draft two");
    assert!(
        body["item"]["draft"].is_null(),
        "a released draft is retired: {body}"
    );
    let (status, body) = s.expert().act(item, "reopen", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.expert().act(item, "release", json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "no_draft");
    assert_eq!(s.count("SELECT count(*) FROM outbox").await, 1);
}

#[tokio::test]
async fn a_draft_of_an_older_message_is_refused_and_a_slow_draft_never_replaces_a_newer_one() {
    // The first message's draft takes 3 s; the second's is immediate.
    let s = Stack::start(agent(Duration::from_secs(3), Duration::ZERO).await).await;
    s.customer_writes("1700000001.000001", "first question")
        .await;
    let item = s.item().await;
    s.customer_writes("1700000001.000002", "second question")
        .await;
    s.until(item, "drafted", |v| draft_text(v) == Some("Draft two"))
        .await;
    // Draft one lands after Draft two: it answers an older message and is kept off the item.
    s.at_least(
        "SELECT count(*) FROM drafts",
        2,
        "the slow draft never landed",
    )
    .await;
    let (view, _) = s.show(item).await;
    assert_eq!(draft_text(&view), Some("Draft two"), "{view}");
    assert_eq!(view["status"], "pending");

    // A third message whose draft is slow: the item's draft now answers an older message.
    s.customer_writes("1700000001.000003", "first question, again")
        .await;
    let inbound = "SELECT count(*) FROM messages WHERE direction = 'inbound'";
    s.at_least(inbound, 3, "the third message was not stored")
        .await;
    let (status, body) = s.expert().act(item, "release", json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "stale_draft");
    assert_eq!(body["current"]["draft"]["text"], "Draft two");
    // What the expert writes is always theirs to send.
    let (status, body) = s
        .expert()
        .act(
            item,
            "release",
            json!({"body": "Checking all three for you."}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // The third message's draft lands after a reply that answered it: it stays off.
    s.at_least(
        "SELECT count(*) FROM drafts",
        3,
        "the third draft never landed",
    )
    .await;
    let (view, _) = s.show(item).await;
    assert_eq!(view["status"], "awaiting_client", "{view}");
    assert!(view["draft"].is_null(), "{view}");
    assert_eq!(s.count("SELECT count(*) FROM outbox").await, 1);
}

/// The release's statement starts before the customer's next message commits and
/// finishes after it: it sends the draft it saw, and the message it did not see brings the
/// item back to pending when its draft lands.
#[tokio::test]
async fn a_message_written_during_a_release_brings_its_item_back_to_pending() {
    let s = Stack::start(agent(Duration::ZERO, Duration::ZERO).await).await;
    s.customer_writes("1700000002.000001", "first question")
        .await;
    let item = s.item().await;
    s.until(item, "drafted", |v| draft_text(v) == Some("Draft one"))
        .await;

    // Hold the item's row, so the release waits inside its statement.
    let pool = s.app.db.pool().await;
    let mut hold = pool.begin().await.expect("begin");
    let conversation: Uuid =
        sqlx::query_scalar("SELECT conversation_id FROM expert_queue WHERE id = $1 FOR UPDATE")
            .bind(item)
            .fetch_one(&mut *hold)
            .await
            .expect("lock");
    let release = {
        let (pod, token) = (Endpoint::clone(s.a()), s.expert.clone());
        let path = format!("/expert-queue/{item}/release");
        tokio::spawn(async move { pod.as_user(&token).post(&path, json!({})).await })
    };
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}'
           AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'",
        s.app.db.name
    );
    let waits = || async { (s.count(&waiting).await > 0).then_some(()) };
    eventually(
        "the release waits on the row",
        Duration::from_secs(10),
        waits,
    )
    .await;
    // The customer's second message commits now, as the inbound job stores it (the item at
    // a new version), while the release's statement waits with its earlier snapshot.
    sqlx::query(
        "INSERT INTO messages (org_id, conversation_id, direction, author, body, channel,
                               channel_message_id, reply_to)
         SELECT org_id, id, 'inbound', 'customer', 'second question', 'slack',
                $2 || ':C1:1700000002.000002', '{\"channel\": \"C1\", \"ts\": \"1700000002.000002\"}'
         FROM conversations WHERE id = $1",
    )
    .bind(conversation)
    .bind(&s.slack)
    .execute(&mut *hold)
    .await
    .expect("second message");
    sqlx::query("UPDATE expert_queue SET version = version + 1 WHERE id = $1")
        .bind(item)
        .execute(&mut *hold)
        .await
        .expect("new version");
    hold.commit().await.expect("commit");
    pool.close().await;
    let (status, body) = release.await.expect("release task");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"]["body"], "Draft one");
    assert_eq!(body["item"]["status"], "awaiting_client");

    // The provider's webhook for that message: the job finds it stored and drafts it.
    s.customer_writes("1700000002.000002", "second question")
        .await;
    let view = s
        .until(item, "back to pending", |v| v["status"] == "pending")
        .await;
    assert_eq!(draft_text(&view), Some("Draft two"), "{view}");
    assert_eq!(
        s.count("SELECT count(*) FROM messages WHERE direction = 'inbound'")
            .await,
        2,
        "the webhook found the message stored"
    );
}

#[tokio::test]
async fn reopening_beside_a_newer_live_item_is_409_with_that_item() {
    let s = Stack::start(agent(Duration::ZERO, Duration::ZERO).await).await;
    s.customer_writes("1700000003.000001", "first question")
        .await;
    let item = s.item().await;
    s.until(item, "drafted", |v| draft_text(v) == Some("Draft one"))
        .await;
    let (status, body) = s.expert().act(item, "resolve", json!({})).await;
    assert_eq!(status, 200, "{body}");
    s.customer_writes("1700000003.000002", "second question")
        .await;
    let newer = s.item().await;
    assert_ne!(newer, item);
    let (status, body) = s.expert().act(item, "reopen", json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["current"]["status"], "resolved");
    assert_eq!(body["current"]["live_item_id"], json!(newer));
    let (view, _) = s.show(item).await;
    assert_eq!(view["status"], "resolved");
}

#[tokio::test]
async fn if_match_is_checked_after_the_state_and_a_bad_one_changes_nothing() {
    let s = Stack::start(agent(Duration::ZERO, Duration::ZERO).await).await;
    s.customer_writes("1700000004.000001", "first question")
        .await;
    let item = s.item().await;
    s.until(item, "drafted", |v| draft_text(v) == Some("Draft one"))
        .await;
    let (view, tag) = s.show(item).await;
    for bad in ["3", "\"three\"", "\"1\", \"2\""] {
        let (status, body, _) = s.expert().act_if_match(item, "claim", json!({}), bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["code"], "invalid_if_match");
    }
    assert_eq!(s.show(item).await.0["version"], view["version"]);
    // A state the action cannot start from is a 409, whatever the version said.
    let (status, body, _) = s
        .expert()
        .act_if_match(item, "unclaim", json!({}), "\"999\"")
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict");
    // The right version: the action, and the new ETag.
    let (status, body, new_tag) = s
        .expert()
        .act_if_match(item, "claim", json!({}), &tag)
        .await;
    assert_eq!(status, 200);
    let new_tag = new_tag.expect("etag");
    assert_eq!(new_tag, format!("\"{}\"", body["item"]["version"]));
    let expert = s.b().as_user(&s.expert);
    let (status, _) = expert.get(&format!("/expert-queue/{item}")).await;
    assert_eq!(status, 200);
    let (status, body) = expert.act(item, "unclaim", json!({})).await;
    assert_eq!(status, 200, "{body}");
}
