//! kill -9 of the pod running a customer's erasure, its transaction open just before the
//! commit: nothing of it is committed, and another pod's `customer-erasure` job finishes it
//! once the lease lapses, with one audit row and no byte of the customer left.

use crate::{process_env, serve_ready, sigkill};
use std::time::Duration;
use switchboard_testing::signing::{self, TELEGRAM_SECRET};
use switchboard_testing::{TestApp, dump, eventually};
use uuid::Uuid;

const CHAT: i64 = 987_654_321_012;
const MARK: &str = "KILLMARK";

#[tokio::test]
async fn an_erasure_killed_before_its_commit_is_finished_by_another_pod() {
    let app = TestApp::builder().fake_agent().build().await;
    let (b, db) = (app.pod(0), &app.db);
    let org = app.org().await;
    let path = org.webhook("telegram");
    for update in [1, 2] {
        let text = format!("{MARK} message {update}");
        let (status, body) = b
            .send_webhook(
                &path,
                &signing::telegram(TELEGRAM_SECRET, update, CHAT, &text),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    db.wait_for_count("SELECT count(*) FROM drafts", 1).await;
    db.wait_for_count("SELECT count(*) FROM messages", 2).await;
    let pool = db.pool().await;
    let customer: Uuid = sqlx::query_scalar("SELECT id FROM customers")
        .fetch_one(&pool)
        .await
        .unwrap();

    // Pod A stops every erasure right before its commit, its transaction open.
    let mut vars = process_env(db, &app.prefix);
    vars.insert("FAULT_INJECT".into(), "erasure:before_commit:hang".into());
    vars.insert("WORKER_CONCURRENCY".into(), "0".into());
    let (mut child, a) = serve_ready(&vars).await;
    let erase = {
        let (http, url, token) = (
            a.client.clone(),
            a.url(&format!("/customers/{customer}/erase")),
            org.token.clone(),
        );
        tokio::spawn(async move { http.post(url).bearer_auth(token).send().await })
    };
    let open_transaction = format!(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = '{}' AND state = 'idle in transaction'
            AND query LIKE 'UPDATE customer_erasures SET status = ''done''%'",
        db.name
    );
    assert!(
        db.wait_for_at_least(&open_transaction, 1).await >= 1,
        "pod A never reached its commit"
    );
    sigkill(&mut child);
    assert!(
        erase.await.unwrap().is_err(),
        "pod A answered although it was killed"
    );

    // Pod B takes it up once A's lease lapses.
    let done = "SELECT count(*) FROM customer_erasures WHERE status = 'done'";
    let finished = eventually(
        "pod B finishes the erasure",
        Duration::from_secs(30),
        || async { (db.count(done).await == 1).then_some(()) },
    );
    finished.await;
    let (attempts, messages): (i32, i64) =
        sqlx::query_as("SELECT attempts, (counts ->> 'messages')::bigint FROM customer_erasures")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((attempts, messages), (2, 2));
    assert_eq!(
        db.count("SELECT count(*) FROM audit_log WHERE action = 'customer.erased'")
            .await,
        1
    );
    let pg = dump::pg_data(db);
    assert!(
        !pg.contains(MARK) && !pg.contains(&CHAT.to_string()),
        "the customer is left"
    );
    let redis = dump::redis_data(&app.prefix).await;
    assert!(!redis.contains(MARK) && !redis.contains(&CHAT.to_string()));
    pool.close().await;
}
