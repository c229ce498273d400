//! The inbound job's batched statements: many jobs' events stored by one statement must
//! come out exactly as if each had run alone.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::ChannelKind;
use switchboard_domain::jobs::InboxMessage;
use switchboard_flows::inbound::{Batches, DraftRow, JobError, MessageRow, StoredMessage};
use switchboard_testing::TestApp;
use switchboard_testing::signing::{SLACK_SECRET, slack};
use uuid::Uuid;

fn message_row(org: Uuid, connection: Uuid, customer: &str, id: &str, text: &str) -> MessageRow {
    let message_id = Uuid::new_v4();
    MessageRow {
        org_id: org,
        channel: ChannelKind::Slack,
        connection_id: connection,
        message: InboxMessage {
            customer_external_id: customer.to_owned(),
            customer_name: Some(format!("Customer {customer}")),
            text: text.to_owned(),
            channel_message_id: id.to_owned(),
            reply_to: json!({"channel": "D1"}),
        },
        message_id,
        entry: json!({"role": "customer", "text": text, "message_id": message_id}),
        traceparent: None,
        event_id: Uuid::new_v4(),
    }
}

fn draft_row(org: Uuid, stored: &StoredMessage, text: &str) -> DraftRow {
    let draft_id = Uuid::new_v4();
    DraftRow {
        event_id: Uuid::new_v4(),
        draft_id,
        org_id: org,
        conversation_id: stored.conversation_id,
        message_id: stored.message_id,
        body: text.to_owned(),
        confidence: Some(0.5),
        cost: Some(0.001),
        fallback: false,
        entry: json!({"role": "agent_draft", "text": text, "draft_id": draft_id}),
        hold: None,
        agent_ms: 0,
        trace_id: None,
    }
}

/// Twelve messages from six customers, sent at once: the first runs alone and the others
/// gather into batches, each customer's two messages in two batches, in order. Each message,
/// draft, history entry, queue item and event comes out as if the jobs had run one by one;
/// an event stored again is recognised, and a row Postgres refuses fails alone.
#[tokio::test]
async fn batched_messages_and_drafts_come_out_as_if_run_alone() {
    let app = TestApp::builder().fake_agent().build().await;
    let db = &app.db;
    let org = app.org().await;
    let (org, slack) = (org.id, org.conns["slack"]);
    let batches = Batches::start(db.pool().await, Duration::from_secs(30), "pod-t".into());

    let rows: Vec<MessageRow> = (0..12)
        .map(|i| {
            let (customer, nth) = (i % 6, i / 6);
            message_row(
                org,
                slack,
                &format!("U{customer}"),
                &format!("m{i}"),
                &format!("c{customer} says {nth}"),
            )
        })
        .collect();
    let stored: Vec<StoredMessage> =
        futures::future::join_all(rows.iter().cloned().map(|r| batches.store_message(r)))
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
    for (i, s) in stored.iter().enumerate() {
        assert!(s.inserted && s.drafted.is_none(), "row {i}");
        assert_eq!(s.message_id, rows[i].message_id, "row {i} keeps its own id");
        let earlier: Vec<&str> = s.bodies.iter().map(String::as_str).collect();
        if i < 6 {
            assert!(earlier.is_empty(), "row {i}: {earlier:?}");
        } else {
            let first = format!("c{} says 0", i % 6);
            assert_eq!(
                earlier,
                [first.as_str()],
                "row {i} sees its customer's first message"
            );
            assert_eq!(s.conversation_id, stored[i - 6].conversation_id);
        }
    }

    // The same provider message in a new event, and a row whose connection does not exist
    // (Postgres refuses it), in one batch with a good row.
    let again = message_row(org, slack, "U0", "m0", "c0 says 0");
    let mut refused = message_row(org, slack, "U7", "m70", "lost");
    refused.connection_id = Uuid::new_v4();
    let fresh = message_row(org, slack, "U8", "m80", "c8 says 0");
    let second =
        futures::future::join_all([again, refused, fresh].map(|r| batches.store_message(r))).await;
    let again = second[0].as_ref().unwrap();
    assert!(!again.inserted && again.message_id == stored[0].message_id);
    assert!(
        matches!(second[1], Err(JobError::Store(_))),
        "{:?}",
        second[1]
    );
    assert!(second[2].as_ref().unwrap().inserted);

    let drafts: Vec<DraftRow> = stored
        .iter()
        .enumerate()
        .map(|(i, s)| draft_row(org, s, &format!("draft {i}")))
        .collect();
    let done =
        futures::future::join_all(drafts.iter().cloned().map(|d| batches.store_draft(d))).await;
    assert!(
        done.iter().all(|d| matches!(d, Ok(Some(false)))),
        "{done:?}"
    );
    let mut repeat = drafts[3].clone();
    repeat.draft_id = Uuid::new_v4();
    assert!(
        batches.store_draft(repeat).await.unwrap().is_none(),
        "one draft per message"
    );

    assert_eq!(db.count("SELECT count(*) FROM messages").await, 13);
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 12);
    assert_eq!(db.count("SELECT count(*) FROM customers").await, 7);
    let pool = db.pool().await;
    let conversations: Vec<(String, Value, i32)> = sqlx::query_as(
        "SELECT cu.external_id, c.agent_context -> 'history_summary', q.version
         FROM conversations c JOIN customers cu ON cu.id = c.customer_id
         JOIN expert_queue q ON q.conversation_id = c.id ORDER BY cu.external_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(conversations.len(), 6, "U8 has no draft, so no item");
    for (customer, history, version) in conversations {
        let n: usize = customer[1..].parse().unwrap();
        let texts: Vec<&str> = history
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["text"].as_str())
            .collect();
        let said = |k| format!("c{n} says {k}");
        let (d0, d1) = (format!("draft {n}"), format!("draft {}", n + 6));
        assert_eq!(texts, [said(0).as_str(), &said(1), &d0, &d1], "{customer}");
        // Created by the first draft, advanced by the second, and by the second message
        // when that found the item already there.
        assert!((2..=3).contains(&version), "{customer}: version {version}");
    }
    // The pod's relay moves events from the outbox to `events` (one transaction a batch).
    let events: Vec<(String, i64)> = sqlx::query_as(
        "SELECT event, count(*) FROM (SELECT event FROM event_outbox
                                      UNION ALL SELECT event FROM events) e
         WHERE event IN ('message_created', 'queue_item_created', 'queue_item_updated')
         GROUP BY event ORDER BY event",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let events: Vec<(&str, i64)> = events.iter().map(|(e, n)| (e.as_str(), *n)).collect();
    assert_eq!(
        events,
        [
            ("message_created", 13),
            ("queue_item_created", 6),
            ("queue_item_updated", 6)
        ]
    );
}

/// A backlog accepted while no pod ran workers drains through the batched statements:
/// every event gets one message and one draft, and each customer's conversation holds
/// exactly its own messages, with one queue item advanced by each draft.
#[tokio::test]
async fn a_backlog_of_many_customers_drains_through_batches() {
    let mut app = TestApp::builder()
        .fake_agent()
        .pod_env(0, "WORKER_CONCURRENCY", "0")
        .build()
        .await;
    let path = app.org().await.webhook("slack");
    let accept = app.pod(0);
    // Four messages each from eight customers, one customer's messages one after another.
    for round in 0..4 {
        let sends: Vec<_> = (0..8)
            .map(|c| {
                slack(
                    SLACK_SECRET,
                    &format!("EvB{c}-{round}"),
                    &format!("UB{c}"),
                    &format!("1700000100.{c:03}{round:03}"),
                    &format!("u{c} message {round}"),
                )
            })
            .collect();
        for (status, body) in
            futures::future::join_all(sends.iter().map(|s| accept.send_webhook(&path, s))).await
        {
            assert_eq!(status, 200, "{body}");
        }
    }
    let unprocessed = "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL";
    assert_eq!(app.db.count(unprocessed).await, 32);
    app.start_pod(&[]).await;
    let db = &app.db;
    assert_eq!(db.wait_for_count(unprocessed, 0).await, 0);
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 32);
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 32);
    let pool = db.pool().await;
    let histories: Vec<(String, Vec<String>, i32)> = sqlx::query_as(
        "SELECT cu.external_id,
                ARRAY(SELECT m.body FROM messages m WHERE m.conversation_id = c.id ORDER BY m.created_at, m.id),
                q.version
         FROM conversations c JOIN customers cu ON cu.id = c.customer_id
         JOIN expert_queue q ON q.conversation_id = c.id ORDER BY cu.external_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(histories.len(), 8);
    for (customer, bodies, version) in histories {
        let mut sorted = bodies.clone();
        sorted.sort();
        let c = &customer[2..];
        let want: Vec<String> = (0..4).map(|r| format!("u{c} message {r}")).collect();
        assert_eq!(sorted, want, "{customer}");
        // One item: created by the first draft, advanced by each later draft and by each
        // later message that found it already there.
        assert!((4..=7).contains(&version), "{customer}: version {version}");
    }
}

/// With Postgres away, a batch fails as a whole: its events share that one error instead of
/// each trying again alone.
#[tokio::test]
async fn a_batch_fails_at_once_while_postgres_is_away() {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(300))
        .connect_lazy("postgres://postgres@127.0.0.1:1/none")
        .unwrap();
    let batches = Batches::start(pool, Duration::from_secs(30), "pod-t".into());
    let claims: Vec<_> = (0..5).map(|_| batches.claim(Uuid::new_v4())).collect();
    let outcomes = futures::future::join_all(claims).await;
    let unavailable = |o: &Result<_, JobError>| match o {
        Err(JobError::Store(e)) => e.is_unavailable(),
        Err(JobError::Batch(e)) => e.is_unavailable(),
        _ => false,
    };
    assert!(outcomes.iter().all(unavailable), "{outcomes:?}");
    // At most the first claim ran alone; the others shared a batch and its one error.
    let shared = outcomes
        .iter()
        .filter(|o| matches!(o, Err(JobError::Batch(_))))
        .count();
    assert!(shared >= outcomes.len() - 1, "{outcomes:?}");
}
