//! Delivery with the expert API on two pods: concurrent releases send once, and a reply
//! leaves through the connection (bot) the customer last wrote to.

use crate::inbound_support::{agent, send};
use crate::outbound_support::{Provider, connection, org, pod, release, seed_item, wait_outbox};
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_testing::signing;
use switchboard_testing::{TestDb, random_prefix};
use uuid::Uuid;

#[tokio::test]
async fn ten_concurrent_releases_across_two_pods_make_one_provider_call() {
    let db = TestDb::fresh().await;
    let provider = Provider::start().await;
    let prefix = random_prefix();
    let a = pod(&db, &prefix, &provider, "http://127.0.0.1:9", &[]).await;
    let b = pod(&db, &prefix, &provider, "http://127.0.0.1:9", &[]).await;
    let org = org(&db, &a).await;
    let reply_to = json!({"channel": "C1", "thread_ts": "1700000000.000100"});
    let item = seed_item(&db, org.id, "slack", org.conns["slack"], reply_to).await;

    let clicks = (0..10).map(|i| release(if i % 2 == 0 { &a } else { &b }, &org.token, item, None));
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
    let outbox: Uuid = ok[0]["message"]["outbox_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let sent = wait_outbox(&db, outbox, "sent").await;
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
    // Sweeps and both pods' workers keep running; still one call.
    tokio::time::sleep(Duration::from_secs(1)).await;
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
    let db = TestDb::fresh().await;
    let provider = Provider::start().await;
    let agent = agent().await;
    let prefix = random_prefix();
    let a = pod(&db, &prefix, &provider, &agent.uri(), &[]).await;
    let b = pod(&db, &prefix, &provider, &agent.uri(), &[]).await;
    let org = org(&db, &a).await;
    let bot_a = org.conns["telegram"];
    let secrets_b = json!({"bot_token": "2:def", "secret_token": "tg-secret-b-0123456789"});
    let bot_b = connection(&a, &org.token, org.id, "telegram", "second bot", secrets_b).await;
    let pending =
        "SELECT count(*) FROM expert_queue WHERE status = 'pending' AND draft_body IS NOT NULL";

    // The same user's message 1 to bot A (update 1, message 1) …
    let to_a = signing::telegram("tg-secret-0123456789", 1, 555, "hello bot A");
    let (status, _) = send(&a, &format!("/webhooks/telegram/{bot_a}"), &to_a).await;
    assert_eq!(status, 200);
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 1).await, 1);
    let item = pending_item(&db).await;
    let (status, answer) = release(&b, &org.token, item, Some("answer via A")).await;
    assert_eq!(status, 200, "{answer}");
    wait_outbox(&db, outbox_of(&answer), "sent").await;

    // … and message 1 to bot B (the same ids): stored too, not taken for a duplicate.
    let to_b = signing::telegram("tg-secret-b-0123456789", 1, 555, "hello bot B");
    let (status, _) = send(&b, &format!("/webhooks/telegram/{bot_b}"), &to_b).await;
    assert_eq!(status, 200);
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 2).await, 2);
    assert_eq!(db.wait_for_count(pending, 1).await, 1);
    let stored = "SELECT count(*) FROM messages WHERE direction = 'inbound'";
    assert_eq!(db.count(stored).await, 2, "both messages are stored");
    let item = pending_item(&db).await;
    let (status, answer) = release(&a, &org.token, item, Some("answer via B")).await;
    assert_eq!(status, 200, "{answer}");
    wait_outbox(&db, outbox_of(&answer), "sent").await;

    let calls = provider.calls("telegram");
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

fn outbox_of(answer: &Value) -> Uuid {
    answer["message"]["outbox_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}
