//! Erasure of one customer: afterwards no byte of theirs is anywhere the server keeps data
//! (a whole-database dump and every Redis key and value), everyone else's data is intact,
//! a provider's late retry stores nothing, a new message makes a new customer, consoles
//! drop the item live; and the erasure is one across pods, finishes after a failure, waits
//! for a reply in flight, and is for the org's admins only.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_domain::faults::DispatchPoint;
use switchboard_testing::signing::{Signed, WHATSAPP_TOKEN};
use switchboard_testing::socket::connect_with;
use switchboard_testing::{Org, TestApp, dump, eventually, wait_outbox};
use uuid::Uuid;

/// The customer to erase, and what identifies them anywhere.
const PHONE: &str = "+4915790012345";
const NAME: &str = "Zebulon Quartermaine";
/// Every text of theirs carries this, so a search for it finds any copy.
const MARK: &str = "ZQMARK";

fn whatsapp(org: &Org, from: &str, name: &str, sid: &str, text: &str) -> Signed {
    let url = format!(
        "https://switchboard.test/webhooks/whatsapp/{}",
        org.conns["whatsapp"]
    );
    let params = vec![
        ("AccountSid", "AC123".to_owned()),
        ("Body", text.to_owned()),
        ("From", format!("whatsapp:{from}")),
        ("MessageSid", sid.to_owned()),
        ("ProfileName", name.to_owned()),
        ("To", "whatsapp:+15550000000".to_owned()),
    ];
    switchboard_channels::signing::whatsapp(WHATSAPP_TOKEN, &url, params)
}

/// The customer writes `text` (message `sid`); waits until `drafts` drafts exist.
async fn writes(app: &TestApp, org: &Org, sid: &str, text: &str, drafts: i64) {
    let (status, body) = app
        .pod(0)
        .send_webhook(
            &org.webhook("whatsapp"),
            &whatsapp(org, PHONE, NAME, sid, text),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let sql = "SELECT count(*) FROM drafts";
    assert_eq!(app.db.wait_for_count(sql, drafts).await, drafts);
}

async fn customer_of(app: &TestApp, phone: &str) -> Uuid {
    app.db
        .scalar(&format!(
            "SELECT id FROM customers WHERE external_id = 'whatsapp:{phone}'"
        ))
        .await
}

async fn pending_item(app: &TestApp) -> Uuid {
    app.db
        .scalar("SELECT id FROM expert_queue WHERE status = 'pending'")
        .await
}

/// Every copy the server could hold of the customer, searched for in `haystack`.
fn traces(haystack: &str) -> Vec<&'static str> {
    [PHONE, &PHONE[1..], "Zebulon", "Quartermaine", MARK]
        .into_iter()
        .filter(|needle| haystack.contains(needle))
        .collect()
}

#[tokio::test]
async fn after_erasure_no_byte_of_the_customer_is_left_on_plain_and_tls_stacks() {
    let app = TestApp::builder().pods(2).fakes().build().await;
    let org = app.org().await;
    let admin = app.pod(0).as_user(&org.token);

    // Another customer of the same org, who must keep everything.
    let other = whatsapp(
        &org,
        "+4915790099999",
        "Ottilie Keep",
        "SMkeep1",
        "KEEPMARK one",
    );
    let (status, _) = app
        .pod(0)
        .send_webhook(&org.webhook("whatsapp"), &other)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        app.db
            .wait_for_count("SELECT count(*) FROM drafts", 1)
            .await,
        1
    );
    let kept_item = pending_item(&app).await;

    // The customer writes, an expert answers (with a key, so the answer is stored), adds a
    // note (likewise), and the customer writes again: that item is still live.
    writes(
        &app,
        &org,
        "SMzq1",
        &format!("{MARK} my order never arrived"),
        2,
    )
    .await;
    let item: Uuid = app
        .db
        .scalar(&format!(
            "SELECT id FROM expert_queue WHERE status = 'pending' AND id <> '{kept_item}'"
        ))
        .await;
    let (status, answer) = admin
        .post_with_key(
            &format!("/expert-queue/{item}/release"),
            json!({"body": format!("Sorry Zebulon, {MARK} ships today")}),
            "release-zq-1",
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    wait_outbox(&app.db, switchboard_testing::outbox_of(&answer), "sent").await;
    let conversation: Uuid = app
        .db
        .scalar(&format!(
            "SELECT conversation_id FROM expert_queue WHERE id = '{item}'"
        ))
        .await;
    let (status, _) = admin
        .post_with_key(
            &format!("/conversations/{conversation}/notes"),
            json!({"body": format!("{MARK} asked twice, Zebulon is upset")}),
            "note-zq-1",
        )
        .await;
    assert_eq!(status, 201);
    writes(&app, &org, "SMzq2", &format!("{MARK} still waiting"), 3).await;
    let customer = customer_of(&app, PHONE).await;
    let live_item: Uuid = app.db.scalar(
        &format!(
            "SELECT id FROM expert_queue WHERE conversation_id = '{conversation}' AND status <> 'resolved'"
        ),
    )
    .await;
    assert!(
        !traces(&dump::pg_data(&app.db)).is_empty(),
        "the data is there to erase"
    );

    // A console on the other pod sees the conversation go.
    let mut sock = connect_with(app.pod(1), &org.token).await;
    let (status, erased) = admin
        .post_with_key(
            &format!("/customers/{customer}/erase"),
            json!({}),
            "erase-zq",
        )
        .await;
    assert_eq!(status, 200, "{erased}");
    assert_eq!(erased["status"], "done");
    assert_eq!(erased["customer_id"], json!(customer));
    let counts = &erased["counts"];
    assert_eq!(
        (
            counts["customers"].as_u64(),
            counts["conversations"].as_u64(),
            counts["messages"].as_u64(),
            counts["drafts"].as_u64(),
            counts["conversation_notes"].as_u64(),
            counts["outbox"].as_u64(),
            counts["inbound_events"].as_u64(),
        ),
        (
            Some(1),
            Some(1),
            Some(3),
            Some(2),
            Some(1),
            Some(1),
            Some(2)
        ),
        "{counts}"
    );
    assert!(counts["idempotency_keys"].as_u64() >= Some(2), "{counts}");
    // Two messages' intake and drafts, a claim-free release and its delivery, at least.
    assert!(counts["message_journey"].as_u64() >= Some(8), "{counts}");
    let (_, event) = sock
        .next_matching(Duration::from_secs(10), |name, _| {
            name == "conversation_erased"
        })
        .await
        .expect("the console is told the conversation is gone");
    assert_eq!(event["conversation_id"], json!(conversation));
    assert_eq!(event["queue_item_id"], json!(live_item));
    sock.close().await;
    // The relay has moved everything it will move.
    app.db
        .wait_for_count("SELECT count(*) FROM event_outbox", 0)
        .await;

    let pg = dump::pg_data(&app.db);
    assert_eq!(traces(&pg), Vec::<&str>::new(), "found in the database");
    let redis = dump::redis_data(&app.prefix).await;
    assert_eq!(traces(&redis), Vec::<&str>::new(), "found in Redis");
    // Their dedup keys went; the other customer's stay.
    assert!(
        redis.contains("SMkeep1"),
        "the scan reads the keys: {redis}"
    );
    assert!(
        !redis.contains("SMzq1") && !redis.contains("SMzq2"),
        "{redis}"
    );
    // Nothing else went.
    assert!(pg.contains("KEEPMARK one") && pg.contains("Ottilie Keep"));
    let db = &app.db;
    assert_eq!(db.count("SELECT count(*) FROM customers").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 1);
    // Their journey went; the other customer's message keeps its own.
    let orphans = "SELECT count(*) FROM message_journey
          WHERE message_id IS NULL OR message_id NOT IN (SELECT id FROM messages)";
    assert_eq!(db.count(orphans).await, 0, "no step outlives its message");
    assert!(db.count("SELECT count(*) FROM message_journey").await > 0);
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM expert_queue WHERE id = '{kept_item}'"
        ))
        .await,
        1
    );
    // The audit row: who, which customer id, how many rows; nothing of theirs.
    let audit: (Option<Uuid>, Value) = {
        let pool = db.pool().await;
        sqlx::query_as(
            "SELECT actor_user_id, details FROM audit_log
              WHERE action = 'customer.erased' AND target_id = $1",
        )
        .bind(customer)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert_eq!(audit.1["counts"], *counts);
    assert!(audit.0.is_some());
    // Asking again answers the same erasure, key or no key.
    let (status, again) = admin
        .post_empty(&format!("/customers/{customer}/erase"))
        .await;
    assert_eq!((status, &again["id"]), (200, &erased["id"]));
    let (status, again) = admin.get(&format!("/customers/{customer}/erasure")).await;
    assert_eq!((status, &again["status"]), (200, &json!("done")));

    // Twilio retries the first message late: a duplicate, nothing stored.
    let inbox = db.count("SELECT count(*) FROM inbound_events").await;
    let late = whatsapp(
        &org,
        PHONE,
        NAME,
        "SMzq1",
        &format!("{MARK} my order never arrived"),
    );
    for pod in [0, 1] {
        let (status, body) = app
            .pod(pod)
            .send_webhook(&org.webhook("whatsapp"), &late)
            .await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("duplicate"), "{body}");
    }
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, inbox);
    assert_eq!(traces(&dump::pg_data(db)), Vec::<&str>::new());

    // A new message from the same number is a new customer.
    let (status, _) = app
        .pod(1)
        .send_webhook(
            &org.webhook("whatsapp"),
            &whatsapp(&org, PHONE, NAME, "SMzq3", "hello again"),
        )
        .await;
    assert_eq!(status, 200);
    db.wait_for_count("SELECT count(*) FROM messages", 2).await;
    let fresh = customer_of(&app, PHONE).await;
    assert_ne!(fresh, customer);
}

#[tokio::test]
async fn two_admins_erasing_at_once_on_two_pods_make_one_erasure_and_one_audit_row() {
    let app = TestApp::builder().pods(2).fake_agent().build().await;
    let org = app.org().await;
    writes(&app, &org, "SMtwo1", "please forget me", 1).await;
    let customer = customer_of(&app, PHONE).await;
    let second = app.member(Some(org.id), Role::Admin).await;
    let path = format!("/customers/{customer}/erase");
    let (a, b) = tokio::join!(
        app.pod(0).as_user(&org.token).post_empty(&path),
        app.pod(1).as_user(&second.token).post_empty(&path),
    );
    for (status, body) in [&a, &b] {
        assert!(*status == 200 || *status == 202, "{status} {body}");
    }
    assert_eq!(a.1["id"], b.1["id"], "one erasure");
    let db = &app.db;
    let done = "SELECT count(*) FROM customer_erasures WHERE status = 'done'";
    assert_eq!(db.wait_for_count(done, 1).await, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM audit_log WHERE action = 'customer.erased'")
            .await,
        1
    );
    assert_eq!(db.count("SELECT count(*) FROM customer_erasures").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 0);
}

#[tokio::test]
async fn an_erasure_that_fails_before_its_commit_is_finished_by_the_scheduled_job() {
    let app = TestApp::builder().fake_agent().build().await;
    let org = app.org().await;
    writes(&app, &org, "SMfail1", &format!("{MARK} erase me"), 1).await;
    let customer = customer_of(&app, PHONE).await;
    let pod = app.pod(0);
    pod.server.state().flows.faults.fail_erasures(1);

    let (status, pending) = pod
        .as_user(&org.token)
        .post_empty(&format!("/customers/{customer}/erase"))
        .await;
    assert_eq!(
        (status, &pending["status"]),
        (202, &json!("pending")),
        "{pending}"
    );
    // Nothing was committed: the data is all there.
    assert_eq!(app.db.count("SELECT count(*) FROM messages").await, 1);
    assert_eq!(app.db.count("SELECT count(*) FROM inbound_events").await, 1);

    // Once the failed attempt's lease lapses, the `customer-erasure` job finishes it.
    let path = format!("/customers/{customer}/erasure");
    let done = eventually(
        "the erasure is finished",
        Duration::from_secs(30),
        || async {
            let (status, body) = pod.as_user(&org.token).get(&path).await;
            (status == 200).then_some(body)
        },
    )
    .await;
    assert_eq!(done["counts"]["messages"], 1);
    let attempts: i32 = app
        .db
        .scalar("SELECT attempts FROM customer_erasures")
        .await;
    assert!(attempts >= 2, "{attempts}");
    assert_eq!(traces(&dump::pg_data(&app.db)), Vec::<&str>::new());
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM audit_log WHERE action = 'customer.erased'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_reply_being_sent_is_delivered_whole_before_the_erasure() {
    let app = TestApp::builder().fakes().build().await;
    let org = app.org().await;
    writes(&app, &org, "SMfly1", "where is it", 1).await;
    let customer = customer_of(&app, PHONE).await;
    let pod = app.pod(0);
    let faults = &pod.server.state().flows.faults;
    // The reply's first part is accepted by the provider, and its job stops there.
    let paused = faults.pause_dispatch(DispatchPoint::PartAccepted);
    let item = pending_item(&app).await;
    let long = (0..700)
        .map(|i| format!("w{i:03}"))
        .collect::<Vec<_>>()
        .join(" ");
    let outbox = pod.as_user(&org.token).release_ok(item, Some(&long)).await;
    paused.reached().await;

    let (status, pending) = pod
        .as_user(&org.token)
        .post_empty(&format!("/customers/{customer}/erase"))
        .await;
    assert_eq!(
        (status, &pending["status"]),
        (202, &json!("pending")),
        "{pending}"
    );
    assert_eq!(app.db.count("SELECT count(*) FROM messages").await, 2);

    paused.resume();
    let sent = wait_outbox(&app.db, outbox, "sent").await;
    let parts = sent.parts.as_array().map(Vec::len).unwrap_or_default();
    assert_eq!(
        app.provider().calls("twilio").len(),
        parts,
        "every part went out"
    );
    let done = "SELECT count(*) FROM customer_erasures WHERE status = 'done'";
    assert_eq!(app.db.wait_for_count(done, 1).await, 1);
    assert_eq!(app.db.count("SELECT count(*) FROM outbox").await, 0);
    assert_eq!(app.db.count("SELECT count(*) FROM messages").await, 0);
}

#[tokio::test]
async fn only_the_orgs_admins_can_erase_and_bad_requests_change_nothing() {
    let app = TestApp::builder().fake_agent().build().await;
    let org = app.org().await;
    writes(&app, &org, "SMauth1", "hi", 1).await;
    let customer = customer_of(&app, PHONE).await;
    let pod = app.pod(0);
    let expert = app.member(Some(org.id), Role::Expert).await;
    let stranger = app.member(None, Role::Admin).await;
    let erase = format!("/customers/{customer}/erase");
    let status_path = format!("/customers/{customer}/erasure");

    for token in [&expert.token, &stranger.token] {
        let (status, body) = pod.as_user(token).post_empty(&erase).await;
        assert_eq!(status, 403, "{body}");
        let (status, _) = pod.as_user(token).get(&status_path).await;
        assert_eq!(status, 403);
    }
    let unknown = Uuid::new_v4();
    let (status, _) = pod
        .as_user(&org.token)
        .post_empty(&format!("/customers/{unknown}/erase"))
        .await;
    assert_eq!(status, 404);
    let (status, body) = pod.as_user(&org.token).get(&status_path).await;
    assert_eq!(status, 404, "no erasure asked for yet: {body}");
    let (status, _) = pod
        .as_user(&org.token)
        .post_empty("/customers/not-a-uuid/erase")
        .await;
    assert_eq!(status, 400);
    let db = &app.db;
    assert_eq!(db.count("SELECT count(*) FROM customer_erasures").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM customers").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 1);

    // Once erased, the others still get 403 on the erasure, not a hint it existed.
    let (status, _) = pod.as_user(&org.token).post_empty(&erase).await;
    assert_eq!(status, 200);
    let (status, _) = pod.as_user(&stranger.token).get(&status_path).await;
    assert_eq!(status, 403);
}
