//! What the inbound flow stores of a customer's messages: every message of a burst in the
//! conversation's history, and a message repeated in a new event stored once.

use serde_json::Value;
use switchboard_domain::{Event, EventKind};
use switchboard_testing::TestApp;
use switchboard_testing::signing::{SLACK_SECRET, slack};

#[tokio::test]
async fn five_concurrent_messages_all_reach_history_summary() {
    let app = TestApp::builder().pods(2).fake_agent().build().await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let org = app.org().await;
    let path = org.webhook("slack");
    let signed: Vec<_> = (0..5)
        .map(|i| {
            slack(
                SLACK_SECRET,
                &format!("EvC{i}"),
                "U9",
                &format!("1700000001.{i:06}"),
                &format!("message {i}"),
            )
        })
        .collect();
    let sends = signed
        .iter()
        .enumerate()
        .map(|(i, s)| [a, b][i % 2].send_webhook(&path, s));
    for (status, _) in futures::future::join_all(sends).await {
        assert_eq!(status, 200);
    }
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 5).await, 5);
    assert_eq!(db.count("SELECT count(*) FROM conversations").await, 1);
    let pool = db.pool().await;
    let history: Value =
        sqlx::query_scalar("SELECT agent_context -> 'history_summary' FROM conversations")
            .fetch_one(&pool)
            .await
            .unwrap();
    let entries = history.as_array().unwrap();
    assert_eq!(
        entries.len(),
        10,
        "5 messages + 5 drafts, capped at 10: {history}"
    );
    for i in 0..5 {
        let text = format!("message {i}");
        assert!(
            entries
                .iter()
                .any(|e| e["role"] == "customer" && e["text"] == text.as_str()),
            "{text} missing: {history}"
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM expert_queue").await,
        1,
        "one live item per conversation"
    );
    // The conversation's last activity is set by its messages' statements (with the time
    // one of them was stored); storing a draft changes only the agent's context, an update
    // that touches no indexed column.
    let set_by_a_message: bool = sqlx::query_scalar(
        "SELECT c.updated_at IN (SELECT m.created_at FROM messages m WHERE m.conversation_id = c.id)
         FROM conversations c",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        set_by_a_message,
        "a draft moved the conversation's updated_at"
    );
}

/// A provider message that arrives again in another event (a new event id, the same
/// message) is stored once, with one history entry and one draft; and a customer whose
/// details did not change is not written again for each message.
#[tokio::test]
async fn a_message_repeated_in_a_new_event_is_stored_once_and_customers_are_not_rewritten() {
    let app = TestApp::builder().fake_agent().build().await;
    let (a, db) = (app.pod(0), &app.db);
    let path = app.org().await.webhook("slack");
    let event = |id: &str, ts: &str, text: &str| slack(SLACK_SECRET, id, "U7", ts, text);
    let processed = "SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL";
    let first = event("EvR1", "1700000002.000001", "first");
    assert_eq!(a.send_webhook(&path, &first).await.0, 200);
    assert_eq!(db.wait_for_count(processed, 1).await, 1);
    let pool = db.pool().await;
    let customer_version = || async {
        sqlx::query_scalar::<_, String>("SELECT xmin::text FROM customers")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let before = customer_version().await;

    let again = event("EvR2", "1700000002.000001", "first");
    assert_eq!(a.send_webhook(&path, &again).await.0, 200);
    let second = event("EvR3", "1700000002.000002", "second");
    assert_eq!(a.send_webhook(&path, &second).await.0, 200);
    assert_eq!(db.wait_for_count(processed, 3).await, 3);
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 2);
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 2);
    let history: Value =
        sqlx::query_scalar("SELECT agent_context -> 'history_summary' FROM conversations")
            .fetch_one(&pool)
            .await
            .unwrap();
    let customer_entries: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "customer")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(customer_entries, ["first", "second"], "{history}");
    assert_eq!(
        customer_version().await,
        before,
        "the customer row was rewritten"
    );
}

/// The inbound job builds its events' payloads in SQL (for speed): every one of them must be
/// exactly the payload type its name promises (`Event::parse` refuses a missing or an extra
/// field), the contract the console's generated types rely on.
#[tokio::test]
async fn the_events_the_inbound_statements_build_parse_as_their_types() {
    let app = TestApp::builder().fake_agent().build().await;
    let (p, db) = (app.pod(0), &app.db);
    let org = app.org().await;
    let path = org.webhook("slack");
    for (i, ts) in ["1700000002.000001", "1700000002.000002"]
        .into_iter()
        .enumerate()
    {
        let signed = slack(SLACK_SECRET, &format!("EvP{i}"), "U7", ts, "Is it shipped?");
        assert_eq!(p.send_webhook(&path, &signed).await.0, 200);
        let drafts = i64::try_from(i + 1).unwrap();
        assert_eq!(
            db.wait_for_count("SELECT count(*) FROM drafts", drafts)
                .await,
            drafts
        );
    }
    let pool = db.pool().await;
    let rows: Vec<(String, Value)> = sqlx::query_as(
        "SELECT event, payload FROM event_outbox UNION ALL SELECT event, payload FROM events",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut kinds: Vec<&str> = Vec::new();
    for (name, payload) in &rows {
        let kind: EventKind = name
            .parse()
            .unwrap_or_else(|()| panic!("unknown event {name}"));
        assert!(
            Event::parse(kind, payload.clone()).is_some(),
            "{name} does not parse as its type: {payload}"
        );
        kinds.push(name);
    }
    for expected in ["message_created", "queue_item_created"] {
        assert!(kinds.contains(&expected), "no {expected} in {kinds:?}");
    }
}
