//! Internal notes: stored with their conversation, listed, audited, pushed live to the other
//! experts' consoles on any pod (`note_added`), one note per Idempotency-Key, scoped to the
//! org; and never sent to the customer nor given to the agent.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::{Event, EventKind, Role};
use switchboard_testing::signing::{SLACK_SECRET, slack};
use switchboard_testing::socket::connect_with;
use switchboard_testing::{TestApp, wait_outbox};
use uuid::Uuid;

async fn one_uuid(app: &TestApp, sql: &str) -> Uuid {
    let pool = app.db.pool().await;
    let id = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
    pool.close().await;
    id
}

#[tokio::test]
async fn notes_are_stored_listed_audited_and_pushed_live_to_an_expert_on_another_pod() {
    let app = TestApp::builder().pods(2).fake_agent().build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org().await;
    let writer = app.member(Some(org.id), Role::Expert).await;
    let reader = app.member(Some(org.id), Role::Expert).await;
    let reader_token = b.login(&reader.email, &reader.password).await;
    let outsider = app.member(None, Role::Admin).await;
    let signed = slack(
        SLACK_SECRET,
        "EvN1",
        "U1",
        "1700000200.000001",
        "where is my order?",
    );
    assert_eq!(a.send_webhook(&org.webhook("slack"), &signed).await.0, 200);
    assert_eq!(
        app.db
            .wait_for_count("SELECT count(*) FROM drafts", 1)
            .await,
        1
    );
    let conversation = one_uuid(&app, "SELECT id FROM conversations").await;
    let notes = format!("/conversations/{conversation}/notes");
    let mut sock = connect_with(b, &reader_token).await;

    let text = "Customer is a VIP — escalate if the parcel is late";
    let (status, note) = a
        .as_user(&writer.token)
        .post(&notes, json!({"body": format!("  {text}\n")}))
        .await;
    assert_eq!(status, 201, "{note}");
    assert_eq!(note["body"], text, "trimmed");
    assert_eq!(note["conversation_id"], json!(conversation));
    assert_eq!(note["author_user_id"], json!(writer.id));
    assert_eq!(note["author_email"], json!(writer.email));

    let (name, data) = sock
        .next_matching(Duration::from_secs(15), |name, _| name == "note_added")
        .await
        .expect("note_added reaches the expert on the other pod");
    assert_eq!(name, "note_added");
    assert_eq!(data["id"], note["id"]);
    assert_eq!(data["body"], text);
    assert_eq!(data["conversation_id"], json!(conversation));
    assert_eq!(data["author_email"], json!(writer.email));
    assert_eq!(data["org_id"], json!(org.id));
    assert!(data["seq"].as_i64().unwrap() > 0, "{data}");

    // The stored event is exactly its payload type.
    let pool = app.db.pool().await;
    let payload: Value =
        sqlx::query_scalar("SELECT payload FROM events WHERE event = 'note_added'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        matches!(Event::parse(EventKind::NoteAdded, payload.clone()), Some(Event::NoteAdded(n)) if n.body == text),
        "{payload}"
    );

    // Listed on any pod, oldest first, with a second note after it.
    let (status, second) = b
        .as_user(&reader_token)
        .post(&notes, json!({"body": "Agreed"}))
        .await;
    assert_eq!(status, 201, "{second}");
    let (status, listed) = b.as_user(&reader_token).get(&notes).await;
    assert_eq!(status, 200, "{listed}");
    let bodies: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, [text, "Agreed"]);
    assert_eq!(
        app.db.count("SELECT count(*) FROM messages").await,
        1,
        "a note is no message"
    );

    // Audited, with the author and the request.
    let audited = app
        .db
        .count(&format!(
            "SELECT count(*) FROM audit_log WHERE action = 'conversation.note_added'
               AND org_id = '{}' AND target_type = 'conversation_note'
               AND target_id = '{}' AND actor_user_id = '{}'
               AND details->>'conversation_id' = '{conversation}'",
            org.id,
            note["id"].as_str().unwrap(),
            writer.id
        ))
        .await;
    assert_eq!(audited, 1);

    // A double click with one Idempotency-Key is one note, answered twice the same.
    let w = a.as_user(&writer.token);
    let (s1, first) = w
        .post_with_key(&notes, json!({"body": "Called them"}), "note-key-1")
        .await;
    let (s2, again) = b
        .as_user(&app.pod(1).login(&writer.email, &writer.password).await)
        .post_with_key(&notes, json!({"body": "Called them"}), "note-key-1")
        .await;
    assert_eq!((s1, s2), (201, 201), "{first} {again}");
    assert_eq!(first["id"], again["id"]);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM conversation_notes WHERE body = 'Called them'")
            .await,
        1
    );

    // Bad input changes nothing.
    let before = app
        .db
        .count("SELECT count(*) FROM conversation_notes")
        .await;
    let events = app.db.count("SELECT count(*) FROM event_outbox").await
        + app.db.count("SELECT count(*) FROM events").await;
    for (body, want) in [
        (json!({"body": "   "}), 422),
        (json!({"body": "x".repeat(4001)}), 422),
        (json!({}), 400),
        (json!({"body": "hi", "internal": false}), 400),
    ] {
        let (status, answer) = w.post(&notes, body.clone()).await;
        assert_eq!(status, want, "{body}: {answer}");
    }
    // Another org's member: 403 both ways; an unknown conversation: 404.
    let o = a.as_user(&outsider.token);
    assert_eq!(o.get(&notes).await.0, 403);
    assert_eq!(o.post(&notes, json!({"body": "peek"})).await.0, 403);
    let unknown = format!("/conversations/{}/notes", Uuid::new_v4());
    assert_eq!(w.post(&unknown, json!({"body": "hi"})).await.0, 404);
    assert_eq!(w.get(&unknown).await.0, 404);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM conversation_notes")
            .await,
        before
    );
    assert_eq!(
        app.db.count("SELECT count(*) FROM event_outbox").await
            + app.db.count("SELECT count(*) FROM events").await,
        events,
        "no event for a refused note"
    );
}

#[tokio::test]
async fn notes_never_reach_the_customer_nor_the_agent() {
    let app = TestApp::builder().pods(2).fakes().build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let path = org.webhook("slack");
    let first = slack(
        SLACK_SECRET,
        "EvP1",
        "U1",
        "1700000300.000001",
        "first question",
    );
    assert_eq!(a.send_webhook(&path, &first).await.0, 200);
    assert_eq!(
        app.db
            .wait_for_count("SELECT count(*) FROM drafts", 1)
            .await,
        1
    );
    let conversation = one_uuid(&app, "SELECT id FROM conversations").await;
    let item = one_uuid(&app, "SELECT id FROM expert_queue").await;

    let secret = format!("NOTE-{} do not tell the customer", Uuid::new_v4().simple());
    let (status, note) = b
        .as_user(&expert.token)
        .post(
            &format!("/conversations/{conversation}/notes"),
            json!({"body": secret}),
        )
        .await;
    assert_eq!(status, 201, "{note}");

    // The expert replies: the provider gets the reply, and nothing else.
    let reply = "Your parcel left the warehouse today.";
    let outbox = a.as_user(&expert.token).release_ok(item, Some(reply)).await;
    wait_outbox(&app.db, outbox, "sent").await;
    // The customer writes again: the agent drafts with the conversation's history.
    let second = slack(
        SLACK_SECRET,
        "EvP2",
        "U1",
        "1700000300.000002",
        "second question",
    );
    assert_eq!(b.send_webhook(&path, &second).await.0, 200);
    assert_eq!(
        app.db
            .wait_for_count("SELECT count(*) FROM drafts", 2)
            .await,
        2
    );

    let provider = app.provider();
    let sent: Vec<String> = ["slack", "twilio", "telegram", "resend"]
        .into_iter()
        .flat_map(|p| provider.calls(p))
        .map(|c| String::from_utf8_lossy(&c.body).into_owned())
        .collect();
    assert_eq!(sent.len(), 1, "one provider call, the reply: {sent:?}");
    assert!(sent[0].contains(reply), "{}", sent[0]);
    assert!(!sent.iter().any(|s| s.contains("NOTE-")), "{sent:?}");

    let asked: Vec<String> = app
        .agent()
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(asked.len(), 2, "one draft per customer message");
    assert!(
        asked[1].contains("second question") && asked[1].contains("first question"),
        "the second draft sees the history: {}",
        asked[1]
    );
    assert!(!asked.iter().any(|s| s.contains("NOTE-")), "{asked:?}");

    let pool = app.db.pool().await;
    let context: Value = sqlx::query_scalar("SELECT agent_context FROM conversations")
        .fetch_one(&pool)
        .await
        .unwrap();
    let context = context.to_string();
    assert!(context.contains("second question"), "{context}");
    assert!(!context.contains("NOTE-"), "{context}");
    let in_messages = app
        .db
        .count("SELECT count(*) FROM messages WHERE body LIKE '%NOTE-%'")
        .await;
    assert_eq!(in_messages, 0);
}
