//! A customer's export (everything held about them, streamed with bounded memory) and the
//! audit log as pages and as CSV / NDJSON streams, for the org's admins only.

use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::signing::{self, TELEGRAM_SECRET};
use switchboard_testing::{Org, TestApp, outbox_of, wait_outbox};
use uuid::Uuid;

/// A Telegram customer who wrote once and got a released reply and a note; returns the
/// customer and their conversation.
async fn customer_with_history(app: &TestApp, org: &Org) -> (Uuid, Uuid) {
    let signed = signing::telegram(TELEGRAM_SECRET, 1, 4242424242, "where is my parcel");
    let (status, _) = app
        .pod(0)
        .send_webhook(&org.webhook("telegram"), &signed)
        .await;
    assert_eq!(status, 200);
    app.db
        .wait_for_count("SELECT count(*) FROM drafts", 1)
        .await;
    let item: Uuid = app.db.scalar("SELECT id FROM expert_queue").await;
    let admin = app.pod(0).as_user(&org.token);
    let (status, answer) = admin.release(item, Some("it ships today")).await;
    assert_eq!(status, 200, "{answer}");
    wait_outbox(&app.db, outbox_of(&answer), "sent").await;
    let conversation: Uuid = app
        .db
        .scalar("SELECT conversation_id FROM expert_queue")
        .await;
    let (status, _) = admin
        .post(
            &format!("/conversations/{conversation}/notes"),
            json!({"body": "called twice"}),
        )
        .await;
    assert_eq!(status, 201);
    (
        app.db.scalar("SELECT id FROM customers").await,
        conversation,
    )
}

#[tokio::test]
async fn a_customers_export_holds_everything_about_them_as_json_or_ndjson() {
    let app = TestApp::builder().fakes().build().await;
    let org = app.org().await;
    let (customer, conversation) = customer_with_history(&app, &org).await;
    let path = format!("/customers/{customer}/export");

    let response = app
        .pod(0)
        .as_user(&org.token)
        .get_accepting(&path, "application/json")
        .await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("attachment")
    );
    let doc: Value = response.json().await.unwrap();
    assert_eq!(doc["customer"]["id"], json!(customer));
    assert_eq!(doc["customer"]["external_id"], "4242424242");
    assert_eq!(doc["conversations"][0]["id"], json!(conversation));
    let messages = doc["messages"].as_array().unwrap();
    let bodies: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| {
            (
                m["direction"].as_str().unwrap(),
                m["body"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bodies,
        [
            ("inbound", "where is my parcel"),
            ("outbound", "it ships today")
        ]
    );
    assert_eq!(messages[1]["delivery_status"], "sent");
    assert_eq!(doc["drafts"][0]["body"], "Happy to help!");
    assert_eq!(doc["notes"][0]["body"], "called twice");
    assert_eq!(doc["notes"][0]["internal"], true);
    assert_eq!(doc["deliveries"][0]["status"], "sent");
    // Each message's path: the customer's from its webhook, the reply's to its delivery.
    let steps: Vec<&str> = doc["journey"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    for step in ["received", "committed", "drafted", "released", "delivered"] {
        assert!(steps.contains(&step), "{step} in {steps:?}");
    }
    let actions: Vec<&str> = doc["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert!(
        actions.iter().any(|a| a.contains("release"))
            && actions.contains(&"conversation.note_added"),
        "{actions:?}"
    );

    let response = app
        .pod(0)
        .as_user(&org.token)
        .get_accepting(&path, "application/x-ndjson")
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let count = |kind: &str| records.iter().filter(|r| r["record"] == kind).count();
    assert_eq!(
        (
            count("customer"),
            count("messages"),
            count("notes"),
            count("drafts")
        ),
        (1, 2, 1, 1)
    );
}

#[tokio::test]
async fn exports_and_the_audit_log_are_for_the_orgs_admins_only() {
    let app = TestApp::builder().fakes().build().await;
    let org = app.org().await;
    let (customer, _) = customer_with_history(&app, &org).await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let stranger = app.member(None, Role::Admin).await;
    let export = format!("/customers/{customer}/export");
    for token in [&expert.token, &stranger.token] {
        assert_eq!(
            app.pod(0)
                .as_user(token)
                .get_accepting(&export, "application/json")
                .await
                .status(),
            403
        );
        let own_org = format!("/audit?org_id={}", org.id);
        assert_eq!(
            app.pod(0)
                .as_user(token)
                .get_accepting(&own_org, "text/csv")
                .await
                .status(),
            403
        );
    }
    // The expert administers no org at all; the stranger sees only their own org's rows.
    assert_eq!(
        app.pod(0)
            .as_user(&expert.token)
            .get_accepting("/audit", "application/json")
            .await
            .status(),
        403
    );
    let (status, page) = app.pod(0).as_user(&stranger.token).get("/audit").await;
    assert_eq!(status, 200);
    assert!(
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["org_id"] == json!(stranger.org)),
        "{page}"
    );
    let unknown = format!("/customers/{}/export", Uuid::new_v4());
    assert_eq!(
        app.pod(0)
            .as_user(&org.token)
            .get_accepting(&unknown, "application/json")
            .await
            .status(),
        404
    );
}

#[tokio::test]
async fn the_audit_log_pages_filters_and_streams_as_csv_and_ndjson() {
    let app = TestApp::builder().fakes().build().await;
    let org = app.org().await;
    customer_with_history(&app, &org).await;
    let admin = app.pod(0).as_user(&org.token);
    let all: i64 = app
        .db
        .count(&format!(
            "SELECT count(*) FROM audit_log WHERE org_id = '{}'",
            org.id
        ))
        .await;
    assert!(all >= 3, "{all}");

    // Pages of one, newest first, each row once.
    let mut seen = Vec::new();
    let mut path = format!("/audit?org_id={}&limit=1", org.id);
    loop {
        let (status, page) = admin.get(&path).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_i64().unwrap()),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/audit?org_id={}&limit=1&cursor={cursor}", org.id),
            None => break,
        }
    }
    assert_eq!(seen.len() as i64, all);
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "{seen:?}");

    let (status, notes) = admin.get("/audit?action=conversation.note_added").await;
    assert_eq!(status, 200);
    assert_eq!(notes["items"].as_array().unwrap().len(), 1, "{notes}");
    assert!(notes["items"][0]["actor_email"].as_str().is_some());
    let future = "/audit?since=2999-01-01T00:00:00Z";
    let (_, none) = admin.get(future).await;
    assert_eq!(none["items"], json!([]));

    let csv = app
        .pod(0)
        .as_user(&org.token)
        .get_accepting("/audit", "text/csv")
        .await;
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines[0], switchboard_store::audit::CSV_HEADER);
    assert_eq!(lines.len() as i64, all + 1, "{text}");
    assert!(lines[1..].iter().all(|l| l.starts_with('"')), "{text}");
    assert!(text.contains("\"conversation.note_added\""));

    let ndjson = app
        .pod(0)
        .as_user(&org.token)
        .get_accepting(
            "/audit?action=conversation.note_added",
            "application/x-ndjson",
        )
        .await;
    let text = ndjson.text().await.unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["data"]["action"], "conversation.note_added");

    // Bad input: a clear error.
    for (query, status) in [
        ("/audit?cursor=nope", 400),
        (
            "/audit?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z",
            422,
        ),
        ("/audit?limit=0", 422),
        ("/audit?since=yesterday", 422),
        ("/audit?colour=red", 422),
    ] {
        let (got, body) = admin.get(query).await;
        assert_eq!(got, status, "{query}: {body}");
    }
}

/// VmHWM (the process's peak resident memory) in kB.
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn the_export_of_a_customer_with_100_000_messages_streams_in_bounded_memory() {
    let app = TestApp::builder().fakes().build().await;
    let org = app.org().await;
    let (customer, conversation) = customer_with_history(&app, &org).await;
    // 100 000 messages of about 1 kB each: some 100 MB of export.
    let pool = app.db.pool().await;
    sqlx::query(
        "INSERT INTO messages (org_id, conversation_id, direction, author, body, channel)
         SELECT $1, $2, 'inbound', 'customer', repeat('m', 1000) || g, 'telegram'
         FROM generate_series(1, 100000) g",
    )
    .bind(org.id)
    .bind(conversation)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let before = peak_rss_kb();
    let mut response = app
        .pod(0)
        .as_user(&org.token)
        .get_accepting(
            &format!("/customers/{customer}/export"),
            "application/x-ndjson",
        )
        .await;
    assert_eq!(response.status(), 200);
    let (mut bytes, mut lines) = (0usize, 0usize);
    while let Some(chunk) = response.chunk().await.unwrap() {
        bytes += chunk.len();
        lines += chunk.iter().filter(|b| **b == b'\n').count();
    }
    let grown_mb = peak_rss_kb().saturating_sub(before) / 1024;
    assert!(bytes > 100_000_000, "{bytes}");
    assert!(lines > 100_002, "{lines}");
    eprintln!("export of {bytes} bytes: peak memory grew by {grown_mb} MB");
    assert!(grown_mb < 50, "the pod's peak memory grew by {grown_mb} MB");
}
