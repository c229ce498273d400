use crate::{process_env, serve_ready, sigkill};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::{TestApp, eventually, seed_queue_items};
use uuid::Uuid;

/// kill -9 of the pod sending a hold, at each fault point of the release: with the outbox
/// row written and the transaction open (nothing committed: the next pod sends it), and
/// right after the commit (sent: nobody sends it again). Either way exactly one reply.
#[tokio::test]
async fn a_pod_killed_while_the_autopilot_sends_a_hold_sends_it_once_or_never() {
    for step in ["after_outbox", "after_commit"] {
        // The in-process pods never run `autopilot-send` until the one started last.
        let mut app = TestApp::builder()
            .no_workers()
            .env("SCHEDULE_AUTOPILOT_SEND", "0 0 0 1 1 *")
            .build()
            .await;
        let db = &app.db;
        let mut vars = process_env(db, &app.prefix);
        vars.insert("WORKER_CONCURRENCY".into(), "0".into());
        vars.insert("SCHEDULE_AUTOPILOT_SEND".into(), "* * * * * *".into());
        vars.insert("FAULT_INJECT".into(), format!("release:{step}:hang"));
        let (mut child, _pod) = serve_ready(&vars).await;

        let admin = app.member(None, Role::Admin).await;
        let connection = app
            .pod(0)
            .as_user(&admin.token)
            .create_connection(admin.org, "slack")
            .await;
        let item = seed_queue_items(db, admin.org, connection, 1).await[0];
        let pool = db.pool().await;
        sqlx::query(
            "UPDATE expert_queue SET status = 'auto_pending', send_at = now(),
                    autopilot_rule = 'slack confidence >= 0.80' WHERE id = $1",
        )
        .bind(item)
        .execute(&pool)
        .await
        .unwrap();

        if step == "after_outbox" {
            // The release holds the item's row, its outbox row not yet committed.
            eventually("the send to hold the item", Duration::from_secs(30), || {
                let pool = pool.clone();
                async move {
                    let free: Option<Uuid> = sqlx::query_scalar(
                        "SELECT id FROM expert_queue WHERE id = $1 FOR UPDATE SKIP LOCKED",
                    )
                    .bind(item)
                    .fetch_optional(&pool)
                    .await
                    .unwrap();
                    free.is_none().then_some(())
                }
            })
            .await;
            assert_eq!(db.count("SELECT count(*) FROM outbox").await, 0);
        } else {
            assert_eq!(
                db.wait_for_count("SELECT count(*) FROM outbox", 1).await,
                1,
                "{step}: the send never committed"
            );
        }
        sigkill(&mut child);

        app.start_pod(&[("SCHEDULE_AUTOPILOT_SEND", "* * * * * *")])
            .await;
        let db = &app.db;
        assert_eq!(
            db.wait_for_count("SELECT count(*) FROM outbox", 1).await,
            1,
            "{step}"
        );
        db.wait_for_job_runs("autopilot-send", 2).await;
        assert_eq!(
            db.count("SELECT count(*) FROM messages WHERE direction = 'outbound'")
                .await,
            1,
            "{step}: sent exactly once"
        );
        let status: String = db
            .scalar(&format!(
                "SELECT status::text FROM expert_queue WHERE id = '{item}'"
            ))
            .await;
        assert_eq!(status, "awaiting_client", "{step}");
        pool.close().await;
    }
}
