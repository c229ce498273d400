//! Retention per org: after one `org-retention` slot, what is older than the org's window is
//! gone from every table, younger rows are intact, another org is untouched, and the slot ran
//! once across three pods; a window out of bounds is refused and changes nothing.

use serde_json::json;
use switchboard_testing::signing::{self, TELEGRAM_SECRET};
use switchboard_testing::{Org, TestApp, outbox_of, wait_outbox};
use uuid::Uuid;

/// A Telegram customer writes, gets a reply and a note, and the item is resolved; waits
/// until `messages` messages exist in all.
async fn history(app: &TestApp, org: &Org, update: i64, chat: i64, messages: i64) {
    let signed = signing::telegram(TELEGRAM_SECRET, update, chat, &format!("text {chat}"));
    let (status, _) = app
        .pod(0)
        .send_webhook(&org.webhook("telegram"), &signed)
        .await;
    assert_eq!(status, 200);
    let pending = format!(
        "SELECT count(*) FROM expert_queue WHERE org_id = '{}' AND status = 'pending'",
        org.id
    );
    app.db.wait_for_count(&pending, 1).await;
    let pool = app.db.pool().await;
    let item: Uuid = sqlx::query_scalar(&pending.replace("count(*)", "id"))
        .fetch_one(&pool)
        .await
        .unwrap();
    let conversation: Uuid = sqlx::query_scalar(&format!(
        "SELECT conversation_id FROM expert_queue WHERE id = '{item}'"
    ))
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    let admin = app.pod(0).as_user(&org.token);
    let (status, answer) = admin
        .post_with_key(
            &format!("/expert-queue/{item}/release"),
            json!({"body": format!("reply {chat}")}),
            &format!("k{chat}"),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    wait_outbox(&app.db, outbox_of(&answer), "sent").await;
    let (status, _) = admin
        .post(
            &format!("/conversations/{conversation}/notes"),
            json!({"body": "a note"}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, body) = admin.act(item, "resolve", json!({})).await;
    assert_eq!(status, 200, "{body}");
    app.db
        .wait_for_count("SELECT count(*) FROM messages", messages)
        .await;
}

/// Moves every row of `org` 40 days into the past.
async fn age(app: &TestApp, org: Uuid) {
    let pool = app.db.pool().await;
    for sql in [
        "UPDATE messages SET created_at = created_at - interval '40 days' WHERE org_id = $1",
        "UPDATE drafts SET created_at = created_at - interval '40 days' WHERE org_id = $1",
        "UPDATE outbox SET created_at = created_at - interval '40 days' WHERE org_id = $1",
        "UPDATE conversation_notes SET created_at = created_at - interval '40 days' WHERE org_id = $1",
        "UPDATE expert_queue SET updated_at = updated_at - interval '40 days' WHERE org_id = $1",
        "UPDATE conversations SET updated_at = updated_at - interval '40 days' WHERE org_id = $1",
        "UPDATE customers SET updated_at = updated_at - interval '40 days' WHERE org_id = $1",
        "UPDATE inbound_events SET received_at = received_at - interval '40 days' WHERE org_id = $1",
        "UPDATE events SET created_at = created_at - interval '40 days' WHERE org_id = $1",
        "UPDATE idempotency_keys SET created_at = created_at - interval '40 days' WHERE org_id = $1",
        "UPDATE message_journey SET at = at - interval '40 days' WHERE org_id = $1",
    ] {
        sqlx::query(sql).bind(org).execute(&pool).await.unwrap();
    }
    pool.close().await;
}

const TABLES: [&str; 10] = [
    "message_journey",
    "customers",
    "conversations",
    "messages",
    "drafts",
    "conversation_notes",
    "outbox",
    "inbound_events",
    "events",
    "idempotency_keys",
];

async fn counts(app: &TestApp, org: Uuid) -> Vec<i64> {
    let mut out = Vec::new();
    for table in TABLES {
        out.push(
            app.db
                .count(&format!(
                    "SELECT count(*) FROM {table} WHERE org_id = '{org}'"
                ))
                .await,
        );
    }
    out
}

#[tokio::test]
async fn one_retention_slot_across_three_pods_removes_what_is_past_the_window_and_nothing_else() {
    let app = TestApp::builder()
        .pods(3)
        .fakes()
        .env("SCHEDULE_ORG_RETENTION", "* * * * * *")
        .build()
        .await;
    let (a, b) = (app.org().await, app.org_via(1).await);
    history(&app, &a, 1, 111, 2).await;
    history(&app, &b, 2, 333, 4).await;
    age(&app, a.id).await;
    age(&app, b.id).await;
    history(&app, &a, 3, 222, 6).await;
    let young = counts(&app, a.id).await;
    let other = counts(&app, b.id).await;

    // Out of bounds: refused, nothing set.
    let admin = app.pod(0).as_user(&a.token);
    let settings = format!("/orgs/{}/settings", a.id);
    for bad in [json!(0), json!(3651), json!("30")] {
        let (status, body) = admin.patch(&settings, json!({"retention_days": bad})).await;
        assert!(status == 422 || status == 400, "{bad}: {status} {body}");
    }
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM orgs WHERE retention_days IS NOT NULL")
            .await,
        0
    );

    let (status, body) = admin.patch(&settings, json!({"retention_days": 30})).await;
    assert_eq!(
        (status, &body["retention_days"]),
        (200, &json!(30)),
        "{body}"
    );
    app.db.wait_for_job_runs("org-retention", 2).await;

    let after = counts(&app, a.id).await;
    // One customer of each kind of row is gone: the old one's; the young one's all stay.
    let left: Vec<(&str, i64, i64)> = TABLES
        .iter()
        .zip(young.iter().zip(&after))
        .map(|(t, (y, a))| (*t, *y, *a))
        .collect();
    for (table, before, now) in &left {
        assert!(now < before, "{table}: nothing old went ({before} → {now})");
        assert!(*now > 0, "{table}: the young rows went too");
    }
    let old_chat = app
        .db
        .count("SELECT count(*) FROM customers WHERE external_id = '111'")
        .await;
    assert_eq!(old_chat, 0);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM messages WHERE body IN ('text 222', 'reply 222')")
            .await,
        2
    );
    assert_eq!(counts(&app, b.id).await, other, "another org is untouched");
    // Each slot ran on one pod only.
    assert_eq!(
        app.db
            .count(
                "SELECT count(*) FROM (SELECT slot FROM cron_runs WHERE job = 'org-retention'
                  GROUP BY slot HAVING count(*) > 1) d"
            )
            .await,
        0
    );
    // Keeping everything again.
    let (status, body) = admin
        .patch(&settings, json!({"retention_days": null}))
        .await;
    assert_eq!((status, &body["retention_days"]), (200, &json!(null)));
}
