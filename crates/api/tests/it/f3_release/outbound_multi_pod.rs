//! Delivery with the expert API on two pods: concurrent releases send once, and a reply
//! leaves through the connection (bot) the customer last wrote to.

use serde_json::{Value, json};
use switchboard_testing::signing::{TELEGRAM_SECRET, telegram};
use switchboard_testing::{TestApp, TestDb, outbox_of, seed_item, wait_outbox};
use uuid::Uuid;

#[tokio::test]
async fn ten_concurrent_releases_across_two_pods_make_one_provider_call() {
    let app = TestApp::builder().pods(2).fake_provider().build().await;
    let (db, provider) = (&app.db, app.provider());
    let org = app.org().await;
    let reply_to = json!({"channel": "C1", "thread_ts": "1700000000.000100"});
    let item = seed_item(db, org.id, "slack", org.conns["slack"], reply_to).await;

    let clicks = (0..10).map(|i| app.pod(i % 2).as_user(&org.token).release(item, None));
    let answers = futures::future::join_all(clicks).await;
    let ok: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(ok.len(), 1, "{answers:?}");
    assert!(
        answers.iter().all(|(s, _)| *s == 200 || *s == 409),
        "{answers:?}"
    );
    let outbox = outbox_of(ok[0]);

    let sent = wait_outbox(db, outbox, "sent").await;
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
    // Sweeps and both pods' workers keep running; still one call.
    db.wait_for_job_runs("outbox-sweeper", 3).await;
    assert_eq!(provider.calls("slack").len(), 1);
    assert_eq!(db.count("SELECT count(*) FROM outbox").await, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM messages WHERE direction = 'outbound'")
            .await,
        1
    );
}

#[tokio::test]
async fn two_telegram_bots_of_one_org_each_answer_through_their_own_bot() {
    let app = TestApp::builder().pods(2).fakes().build().await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let org = app.org().await;
    let bot_a = org.conns["telegram"];
    let secrets_b = json!({"bot_token": "2:def", "secret_token": "tg-secret-b-0123456789"});
    let bot_b = a
        .as_user(&org.token)
        .create_connection_with(org.id, "telegram", "second bot", secrets_b)
        .await;
    let pending =
        "SELECT count(*) FROM expert_queue WHERE status = 'pending' AND draft_body IS NOT NULL";

    // The same user's message 1 to bot A (update 1, message 1) …
    let to_a = telegram(TELEGRAM_SECRET, 1, 555, "hello bot A");
    let (status, _) = a
        .send_webhook(&format!("/webhooks/telegram/{bot_a}"), &to_a)
        .await;
    assert_eq!(status, 200);
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 1).await, 1);
    let item = pending_item(db).await;
    let (status, answer) = b
        .as_user(&org.token)
        .release(item, Some("answer via A"))
        .await;
    assert_eq!(status, 200, "{answer}");
    wait_outbox(db, outbox_of(&answer), "sent").await;

    // … and message 1 to bot B (the same ids): stored too, not taken for a duplicate.
    let to_b = telegram("tg-secret-b-0123456789", 1, 555, "hello bot B");
    let (status, _) = b
        .send_webhook(&format!("/webhooks/telegram/{bot_b}"), &to_b)
        .await;
    assert_eq!(status, 200);
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 2).await, 2);
    assert_eq!(db.wait_for_count(pending, 1).await, 1);
    let stored = "SELECT count(*) FROM messages WHERE direction = 'inbound'";
    assert_eq!(db.count(stored).await, 2, "both messages are stored");
    let item = pending_item(db).await;
    let (status, answer) = a
        .as_user(&org.token)
        .release(item, Some("answer via B"))
        .await;
    assert_eq!(status, 200, "{answer}");
    wait_outbox(db, outbox_of(&answer), "sent").await;

    let calls = app.provider().calls("telegram");
    let sent: Vec<(String, Value)> = calls
        .iter()
        .map(|c| (c.path.clone(), c.json()["text"].clone()))
        .collect();
    assert_eq!(
        sent,
        [
            ("/bot1:abc/sendMessage".to_owned(), json!("answer via A")),
            ("/bot2:def/sendMessage".to_owned(), json!("answer via B")),
        ]
    );
    let current = format!("SELECT count(*) FROM conversations WHERE connection_id = '{bot_b}'");
    assert_eq!(
        db.count(&current).await,
        1,
        "the conversation follows the latest bot"
    );
}

async fn pending_item(db: &TestDb) -> Uuid {
    let pool = db.pool().await;
    let id = sqlx::query_scalar("SELECT id FROM expert_queue WHERE status = 'pending'")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}
