//! The autopilot's holds, end to end through real webhooks, the agent (faked, its confidence
//! scripted by what the customer wrote) and the provider (faked): a draft the org's rules
//! admit waits visibly, then sends itself once across pods; every rule that refuses leaves
//! it for an expert; an expert's action, a customer's new message, Stop and the kill switch
//! each end a hold, and nothing of a stopped hold is ever sent.

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use switchboard_domain::Role;
use switchboard_testing::fakes::{agent_responding, newest_customer_line};
use switchboard_testing::signing::{SLACK_SECRET, Signed, slack};
use switchboard_testing::socket::connect_with;
use switchboard_testing::{Org, TestApp};
use uuid::Uuid;
use wiremock::{Request, Respond, ResponseTemplate};

/// The agent, scripted by the newest customer line: "unsure" drafts at confidence 0.3,
/// "link" drafts a reply with a link nobody gave, "faq" one with the saved reply's link,
/// anything else a plain answer at 0.95.
struct Scripted;

impl Respond for Scripted {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let newest = newest_customer_line(request).unwrap_or_default();
        let (reply, confidence) = if newest.contains("unsure") {
            ("Maybe?".to_owned(), 0.3)
        } else if newest.contains("link") {
            ("See https://evil.example/pay".to_owned(), 0.99)
        } else if newest.contains("faq") {
            ("All in https://shop.example/faq".to_owned(), 0.99)
        } else {
            (format!("We open at nine ({newest})."), 0.95)
        };
        ResponseTemplate::new(200)
            .set_body_json(json!({"reply": reply, "confidence": confidence, "cost_usd": 0.001}))
    }
}

/// Two pods (`pods`), workers on, the scripted agent, the fake provider, and
/// `autopilot-send` every second on each.
async fn stack(pods: usize) -> TestApp {
    TestApp::builder()
        .pods(pods)
        .agent(agent_responding(Scripted).await)
        .fake_provider()
        .env("SCHEDULE_AUTOPILOT_SEND", "* * * * * *")
        .build()
        .await
}

/// Slack drafts at 0.8 or more send themselves after `hold_secs`; `never_when` as given.
async fn turn_on(app: &TestApp, org: &Org, hold_secs: u32, never_when: Value) {
    let (status, body) = app
        .pod(0)
        .as_user(&org.token)
        .put(
            &format!("/orgs/{}/autopilot", org.id),
            json!({
                "enabled": true,
                "channels": {"slack": {"enabled": true, "min_confidence": 0.8, "hold_secs": hold_secs}},
                "never_when": never_when,
            }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

static EVENT: AtomicU64 = AtomicU64::new(0);

/// A new Slack message from `user` (an event and a timestamp of its own).
fn message(user: &str, text: &str) -> Signed {
    let n = EVENT.fetch_add(1, Ordering::Relaxed);
    slack(
        SLACK_SECRET,
        &format!("EvAuto{n}-{}", Uuid::new_v4().simple()),
        user,
        &format!("1700000100.{n:06}"),
        text,
    )
}

/// The live item of Slack customer `user`: its id, state and version.
async fn item_of(app: &TestApp, user: &str) -> (Uuid, String, i32) {
    sqlx::query_as(
        "SELECT q.id, q.status::text, q.version FROM expert_queue q
         JOIN conversations c ON c.id = q.conversation_id
         JOIN customers cu ON cu.id = c.customer_id
         WHERE cu.external_id = $1 AND q.status <> 'resolved'",
    )
    .bind(user)
    .fetch_one(&app.db.pool().await)
    .await
    .unwrap()
}

/// Ends every hold's wait now (the hold itself was seen): the next `autopilot-send` run
/// finds them due.
async fn fast_forward(app: &TestApp) {
    sqlx::query("UPDATE expert_queue SET send_at = now() WHERE status = 'auto_pending'")
        .execute(&app.db.pool().await)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_confident_draft_sends_itself_once_after_its_visible_hold() {
    let app = stack(2).await;
    let db = &app.db;
    let org = app.org().await;
    turn_on(&app, &org, 10, json!({})).await;
    let mut sock = connect_with(app.pod(1), &org.token).await;

    let sent_at = chrono::Utc::now();
    let (status, _) = app
        .pod(0)
        .send_webhook(&org.webhook("slack"), &message("U1", "when do you open?"))
        .await;
    assert_eq!(status, 200);
    // Live in a console on the other pod, with the countdown's end and the rule.
    let (_, created) = sock
        .next_matching(std::time::Duration::from_secs(30), |name, data| {
            name == "queue_item_created" && data["status"] == "auto_pending"
        })
        .await
        .expect("the hold reached the console");
    let item = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["autopilot_rule"], "slack confidence >= 0.80");
    let (status, shown) = app
        .pod(1)
        .as_user(&org.token)
        .get(&format!("/expert-queue/{item}"))
        .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "auto_pending");
    let send_at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(shown["send_at"].clone()).unwrap();
    let ahead = (send_at - sent_at).num_milliseconds();
    assert!(
        (9_000..=12_000).contains(&ahead),
        "send_at {ahead} ms ahead"
    );
    assert_eq!(db.count("SELECT count(*) FROM outbox").await, 0, "held");

    // After the hold: released by the autopilot with the rule's name, through the outbox.
    assert_eq!(db.wait_for_count("SELECT count(*) FROM outbox", 1).await, 1);
    let released_at: chrono::DateTime<chrono::Utc> =
        db.scalar("SELECT created_at FROM outbox").await;
    assert!(released_at >= send_at, "not sent before its time");
    let (author, user, body): (String, Option<Uuid>, String) = sqlx::query_as(
        "SELECT author::text, author_user_id, body FROM messages WHERE direction = 'outbound'",
    )
    .fetch_one(&db.pool().await)
    .await
    .unwrap();
    assert_eq!((author.as_str(), user), ("agent", None));
    assert_eq!(body, "We open at nine (when do you open?).");
    let details: Value = db
        .scalar("SELECT details FROM audit_log WHERE action = 'queue_item.release'")
        .await;
    assert_eq!(details["by"], "autopilot", "{details}");
    assert_eq!(details["rule"], "slack confidence >= 0.80");
    assert_eq!(details["reply"], "draft");
    assert_eq!(item_of(&app, "U1").await.1, "awaiting_client");
    assert_eq!(
        db.wait_for_count(
            "SELECT count(*) FROM messages WHERE direction = 'outbound' AND delivery_status = 'sent'",
            1
        )
        .await,
        1,
        "delivered"
    );

    // Later runs on either pod send nothing more.
    db.wait_for_job_runs("autopilot-send", 2).await;
    assert_eq!(db.count("SELECT count(*) FROM outbox").await, 1);
    assert_eq!(app.provider().calls("slack").len(), 1);
    sock.close().await;
}

#[tokio::test]
async fn each_rule_admits_or_refuses_a_draft_that_came_through_a_webhook() {
    let app = stack(1).await;
    let org = app.org().await;
    let admin = app.pod(0).as_user(&org.token);
    let (status, body) = admin
        .post(
            &format!("/orgs/{}/saved-replies", org.id),
            json!({"name": "faq", "body": "Our answers: https://shop.example/faq"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // A customer who had a conversation before, for the `new_customer` rule.
    let returning = "U-returning";
    app.pod(0)
        .send_webhook(
            &org.webhook("slack"),
            &message(returning, "unsure: first visit"),
        )
        .await;
    app.db
        .wait_for_count("SELECT count(*) FROM drafts", 1)
        .await;
    let (first, _, _) = item_of(&app, returning).await;
    let (status, _) = admin
        .post_empty(&format!("/expert-queue/{first}/resolve"))
        .await;
    assert_eq!(status, 200);
    sqlx::query("UPDATE conversations SET status = 'closed'")
        .execute(&app.db.pool().await)
        .await
        .unwrap();
    turn_on(
        &app,
        &org,
        3600,
        json!({"phrases": ["refund", "talk to a human"], "new_customer": true}),
    )
    .await;

    let cases = [
        (returning, "what time do you open?", "auto_pending"),
        ("U-unsure", "unsure what to ask", "pending"),
        ("U-refund", "I want a REFUND now", "pending"),
        ("U-human", "let me Talk To A Human", "pending"),
        ("U-link", "send me a link", "pending"),
        ("U-faq", "where is the faq", "pending"),
    ];
    for (user, text, _) in cases {
        let (status, _) = app
            .pod(0)
            .send_webhook(&org.webhook("slack"), &message(user, text))
            .await;
        assert_eq!(status, 200);
    }
    app.db
        .wait_for_count("SELECT count(*) FROM drafts", 1 + cases.len() as i64)
        .await;
    for (user, text, want) in cases {
        assert_eq!(item_of(&app, user).await.1, want, "{user}: {text}");
    }

    // Without the new-customer rule, a known link is admitted and an unknown one is not.
    turn_on(&app, &org, 3600, json!({})).await;
    for user in ["U-faq2", "U-link2"] {
        let text = if user == "U-faq2" { "faq?" } else { "link?" };
        app.pod(0)
            .send_webhook(&org.webhook("slack"), &message(user, text))
            .await;
    }
    app.db
        .wait_for_count("SELECT count(*) FROM drafts", 3 + cases.len() as i64)
        .await;
    assert_eq!(item_of(&app, "U-faq2").await.1, "auto_pending");
    assert_eq!(item_of(&app, "U-link2").await.1, "pending");
    assert_eq!(
        item_of(&app, returning).await.1,
        "pending",
        "changing the policy stopped the hold it had admitted"
    );
}

#[tokio::test]
async fn stop_an_experts_action_or_a_new_customer_message_ends_a_hold_and_nothing_of_it_is_sent() {
    let app = stack(2).await;
    let db = &app.db;
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    turn_on(&app, &org, 3600, json!({})).await;
    let users = ["U-stop", "U-claim", "U-again", "U-edit", "U-snooze"];
    for user in users {
        app.pod(0)
            .send_webhook(&org.webhook("slack"), &message(user, "hello"))
            .await;
    }
    assert_eq!(
        db.wait_for_count(
            "SELECT count(*) FROM expert_queue WHERE status = 'auto_pending'",
            5
        )
        .await,
        5
    );
    let as_expert = || app.pod(1).as_user(&expert.token);

    let (stop, _, version) = item_of(&app, "U-stop").await;
    let (status, body) = as_expert()
        .post_empty(&format!("/expert-queue/{stop}/stop"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["item"]["status"], "pending");
    assert_eq!(body["item"]["send_at"], Value::Null);
    assert_eq!(body["item"]["version"], version + 1);
    let (status, body) = as_expert()
        .post_empty(&format!("/expert-queue/{stop}/stop"))
        .await;
    assert_eq!(status, 409, "not on hold any more: {body}");

    let (claim, _, _) = item_of(&app, "U-claim").await;
    let (status, _) = as_expert()
        .post_empty(&format!("/expert-queue/{claim}/claim"))
        .await;
    assert_eq!(status, 200);
    let (snooze, _, _) = item_of(&app, "U-snooze").await;
    let until = chrono::Utc::now() + chrono::Duration::hours(1);
    let (status, _) = as_expert()
        .post(
            &format!("/expert-queue/{snooze}/snooze"),
            json!({"until": until}),
        )
        .await;
    assert_eq!(status, 200);
    // The customer writes again, unsure: the new draft is judged afresh and refused.
    app.pod(1)
        .send_webhook(&org.webhook("slack"), &message("U-again", "unsure, again"))
        .await;
    db.wait_for_count("SELECT count(*) FROM drafts", 6).await;
    assert_eq!(item_of(&app, "U-again").await.1, "pending");
    // The expert edits the held draft and sends their version.
    let (edit, _, _) = item_of(&app, "U-edit").await;
    let (status, body) = as_expert()
        .post(
            &format!("/expert-queue/{edit}/release"),
            json!({"body": "We open at nine, and close at six."}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"]["author"], "expert");
    // The draft it was made from is kept: an admin reading the conversation gets it (the
    // console shows the word diff), an expert does not.
    let conversation = body["item"]["conversation_id"].as_str().unwrap().to_owned();
    let reply_of = |page: &Value| {
        page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["direction"] == "outbound")
            .cloned()
            .unwrap()
    };
    let (_, page) = app
        .pod(0)
        .as_user(&org.token)
        .get(&format!("/conversations/{conversation}"))
        .await;
    assert_eq!(
        reply_of(&page)["draft"],
        "We open at nine (hello).",
        "{page}"
    );
    let (_, page) = as_expert()
        .get(&format!("/conversations/{conversation}"))
        .await;
    assert_eq!(reply_of(&page)["draft"], Value::Null);

    assert_eq!(
        db.count("SELECT count(*) FROM expert_queue WHERE status = 'auto_pending'")
            .await,
        0
    );
    fast_forward(&app).await;
    db.wait_for_job_runs("autopilot-send", 2).await;
    let sent: Vec<(String, Option<Uuid>)> =
        sqlx::query_as("SELECT body, author_user_id FROM messages WHERE direction = 'outbound'")
            .fetch_all(&db.pool().await)
            .await
            .unwrap();
    assert_eq!(
        sent,
        [(
            "We open at nine, and close at six.".to_owned(),
            Some(expert.id)
        )],
        "only the expert's own release went out"
    );
    let stops: i64 = db
        .count("SELECT count(*) FROM audit_log WHERE action = 'queue_item.stop'")
        .await;
    assert_eq!(stops, 1);
    let stopped_by_actions: i64 = db
        .count("SELECT count(*) FROM audit_log WHERE details->>'hold_stopped' = 'true'")
        .await;
    assert_eq!(
        stopped_by_actions, 4,
        "stop, claim, snooze and the edited release"
    );
}

#[tokio::test]
async fn the_kill_switch_stops_a_hundred_holds_at_once_in_every_console() {
    let app = stack(2).await;
    let db = &app.db;
    let org = app.org().await;
    turn_on(&app, &org, 3600, json!({})).await;
    for i in 0..100 {
        let pod = app.pod(i % 2);
        let (status, _) = pod
            .send_webhook(
                &org.webhook("slack"),
                &message(&format!("U-many-{i}"), "hi"),
            )
            .await;
        assert_eq!(status, 200);
    }
    assert_eq!(
        db.wait_for_count(
            "SELECT count(*) FROM expert_queue WHERE status = 'auto_pending'",
            100
        )
        .await,
        100
    );
    // The holds' own events published first: the console below hears only the pause's.
    let unpublished = "SELECT (SELECT count(*) FROM event_outbox)
        + (SELECT count(*) FROM org_event_seq WHERE published_seq < seq)";
    db.wait_for_count(unpublished, 0).await;
    let mut sock = connect_with(app.pod(1), &org.token).await;
    let (status, body) = app
        .pod(0)
        .as_user(&org.token)
        .post_empty(&format!("/orgs/{}/autopilot/pause", org.id))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["enabled"], false);
    assert_eq!(
        db.count("SELECT count(*) FROM expert_queue WHERE status = 'pending' AND send_at IS NULL")
            .await,
        100,
        "every hold stopped in the pause's transaction"
    );
    let events = sock.take(100).await;
    assert_eq!(
        events.len(),
        100,
        "the socket's client reported {:?}",
        sock.reported()
    );
    assert!(
        events
            .iter()
            .all(|(name, data)| name == "queue_item_updated" && data["status"] == "pending"),
        "{events:?}"
    );
    let details: Value = db
        .scalar("SELECT details FROM audit_log WHERE action = 'autopilot.paused'")
        .await;
    assert_eq!(details["holds_stopped"], 100);
    fast_forward(&app).await;
    db.wait_for_job_runs("autopilot-send", 2).await;
    assert_eq!(db.count("SELECT count(*) FROM outbox").await, 0);
    sock.close().await;
}

#[tokio::test]
async fn two_pods_send_two_hundred_holds_each_exactly_once() {
    let app = stack(2).await;
    let db = &app.db;
    let org = app.org().await;
    turn_on(&app, &org, 10, json!({})).await;
    for i in 0..200 {
        let (status, _) = app
            .pod(i % 2)
            .send_webhook(
                &org.webhook("slack"),
                &message(&format!("U-pair-{i}"), "hi"),
            )
            .await;
        assert_eq!(status, 200);
    }
    assert_eq!(
        db.wait_for_count(
            "SELECT count(*) FROM expert_queue WHERE status IN ('auto_pending', 'awaiting_client')",
            200
        )
        .await,
        200,
        "every draft admitted"
    );
    fast_forward(&app).await;
    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM outbox", 200).await,
        200
    );
    db.wait_for_job_runs("autopilot-send", 2).await;
    assert_eq!(
        db.count(
            "SELECT count(*) FROM (SELECT conversation_id FROM messages WHERE direction = 'outbound'
               GROUP BY conversation_id HAVING count(*) = 1) once"
        )
        .await,
        200,
        "one reply per conversation"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM messages WHERE direction = 'outbound'")
            .await,
        200
    );
    assert_eq!(
        db.count("SELECT count(*) FROM audit_log WHERE details->>'by' = 'autopilot'")
            .await,
        200
    );
}

#[tokio::test]
async fn over_the_hourly_cap_a_hold_waits_for_an_expert_and_a_correction_raises_an_alert() {
    let app = stack(1).await;
    let db = &app.db;
    let org = app.org().await;
    let admin = app.pod(0).as_user(&org.token);
    let path = format!("/orgs/{}/autopilot", org.id);
    let capped = json!({
        "enabled": true,
        "channels": {"slack": {"enabled": true, "min_confidence": 0.8, "hold_secs": 3600}},
        "max_per_hour": 2,
    });
    assert_eq!(admin.put(&path, capped.clone()).await.0, 200);
    for user in ["U-cap-1", "U-cap-2", "U-cap-3"] {
        app.pod(0)
            .send_webhook(&org.webhook("slack"), &message(user, "hours?"))
            .await;
    }
    db.wait_for_count(
        "SELECT count(*) FROM expert_queue WHERE status = 'auto_pending'",
        3,
    )
    .await;
    fast_forward(&app).await;
    assert_eq!(db.wait_for_count("SELECT count(*) FROM outbox", 2).await, 2);
    db.wait_for_job_runs("autopilot-send", 2).await;
    assert_eq!(db.count("SELECT count(*) FROM outbox").await, 2, "capped");
    assert_eq!(
        db.count("SELECT count(*) FROM expert_queue WHERE status = 'pending'")
            .await,
        1
    );
    let why: Value = db
        .scalar("SELECT details FROM audit_log WHERE action = 'queue_item.stop'")
        .await;
    assert_eq!(why, json!({"by": "autopilot", "why": "max_per_hour"}));

    // An expert writes to a customer the autopilot answered a moment ago: a correction.
    let sent: Uuid = db
        .scalar("SELECT id FROM expert_queue WHERE status = 'awaiting_client' LIMIT 1")
        .await;
    assert_eq!(
        admin
            .post_empty(&format!("/expert-queue/{sent}/reopen"))
            .await
            .0,
        200
    );
    let (status, body) = app
        .pod(0)
        .as_user(&org.token)
        .post(
            &format!("/expert-queue/{sent}/respond"),
            json!({"body": "Sorry: we open at ten."}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let open =
        "SELECT count(*) FROM alert_incidents WHERE kind = 'autopilot_undone' AND status = 'open'";
    assert_eq!(db.count(open).await, 1);
    let details: Value = db
        .scalar("SELECT details FROM alert_incidents WHERE kind = 'autopilot_undone'")
        .await;
    assert_eq!(details["expert_message_id"], body["message"]["id"]);
    // A reply to a conversation the autopilot never answered is no correction.
    let other: Uuid = db
        .scalar("SELECT id FROM expert_queue WHERE status = 'pending'")
        .await;
    app.pod(0)
        .as_user(&org.token)
        .post(
            &format!("/expert-queue/{other}/respond"),
            json!({"body": "Nine to six."}),
        )
        .await;
    assert_eq!(
        db.count("SELECT count(*) FROM alert_incidents WHERE kind = 'autopilot_undone'")
            .await,
        1
    );
    // The admin revisits the rules: resolved.
    assert_eq!(admin.put(&path, capped).await.0, 200);
    assert_eq!(db.count(open).await, 0);
}

/// Records failures on `breaker` until it is open.
async fn open(breaker: &switchboard_coord::breaker::Breaker) {
    for _ in 0..50 {
        if breaker.is_open().await.unwrap() {
            return;
        }
        breaker.record_failure().await.unwrap();
    }
    panic!("{} did not open", breaker.name());
}

#[tokio::test]
async fn a_breaker_that_opens_during_the_hold_stops_it_for_an_expert_and_nothing_is_sent() {
    let app = TestApp::builder()
        .agent(agent_responding(Scripted).await)
        .fake_provider()
        .env("SCHEDULE_AUTOPILOT_SEND", "* * * * * *")
        .env("OUTBOUND_BREAKER_THRESHOLD", "3")
        .build()
        .await;
    let db = &app.db;
    let org = app.org().await;
    turn_on(&app, &org, 3600, json!({})).await;
    let deps = &app.pod(0).server.state().flows;
    let stopped = |why: &str| {
        format!(
            "SELECT count(*) FROM audit_log WHERE action = 'queue_item.stop'
             AND details = '{{\"by\": \"autopilot\", \"why\": \"{why}\"}}'::jsonb"
        )
    };

    // The connection's breaker opens while the draft waits: the item goes to the experts.
    app.pod(0)
        .send_webhook(&org.webhook("slack"), &message("U-brk-1", "hours?"))
        .await;
    db.wait_for_count(
        "SELECT count(*) FROM expert_queue WHERE status = 'auto_pending'",
        1,
    )
    .await;
    let outbound = switchboard_flows::dispatch::breaker(
        deps,
        switchboard_domain::ChannelKind::Slack,
        org.conns["slack"],
    );
    open(&outbound).await;
    fast_forward(&app).await;
    assert_eq!(
        db.wait_for_count(&stopped("outbound_breaker_open"), 1)
            .await,
        1
    );
    assert_eq!(item_of(&app, "U-brk-1").await.1, "pending");

    // The agent's breaker opens while another waits (the connection is healthy again).
    outbound.record_success().await.unwrap();
    app.pod(0)
        .send_webhook(&org.webhook("slack"), &message("U-brk-2", "hours?"))
        .await;
    db.wait_for_count(
        "SELECT count(*) FROM expert_queue WHERE status = 'auto_pending'",
        1,
    )
    .await;
    open(deps.agent.breaker()).await;
    fast_forward(&app).await;
    assert_eq!(
        db.wait_for_count(&stopped("agent_breaker_open"), 1).await,
        1
    );
    assert_eq!(item_of(&app, "U-brk-2").await.1, "pending");

    db.wait_for_job_runs("autopilot-send", 2).await;
    assert_eq!(
        db.count("SELECT count(*) FROM outbox").await,
        0,
        "nothing sent"
    );
    assert!(app.provider().calls("slack").is_empty());
}
