//! Dead letters: the dead-letter worker's retries until `dead` with exactly one alert
//! across pods, and the admin endpoints (list, retry, audit, 403 for everyone else).

use crate::support::alerts::{alerts_for, capture};
use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{TestApp, delivery, seed_item, wait_outbox};
use uuid::Uuid;
use wiremock::ResponseTemplate;

fn reply_to() -> Value {
    json!({"channel": "C1", "thread_ts": "1700000000.000100"})
}

#[tokio::test]
async fn a_reply_that_always_fails_is_retried_five_times_then_dead_with_one_alert() {
    capture();
    let app = TestApp::builder()
        .pods(2)
        .fake_provider()
        .env("DEAD_LETTER_INTERVAL_MS", "200")
        .env("DEAD_LETTER_BACKOFF_MS", "50")
        .build()
        .await;
    let (a, db, provider) = (app.pod(0), &app.db, app.provider());
    let org = app.org().await;
    let item = seed_item(db, org.id, "slack", org.conns["slack"], reply_to()).await;
    provider.always(Some(ResponseTemplate::new(500)));
    let outbox = a.as_user(&org.token).release_ok(item, None).await;

    let dead = wait_outbox(db, outbox, "dead").await;
    assert_eq!(dead.delivery_status.as_deref(), Some("dead"));
    assert_eq!(
        provider.calls("slack").len(),
        18,
        "3 attempts in the first round and in each of the 5 retries"
    );
    let pool = db.pool().await;
    let (failure, status, retries, attempts, alerted): (Uuid, String, i32, i32, bool) =
        sqlx::query_as(
            "SELECT id, status, retries, attempts, alerted_at IS NOT NULL
             FROM channel_failures WHERE outbox_id = $1",
        )
        .bind(outbox)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(
        (status.as_str(), retries, attempts, alerted),
        ("dead", 5, 18, true)
    );
    // Both pods' dead-letter slots run several more times; still one alert.
    db.wait_for_job_runs("dead-letters", 4).await;
    assert_eq!(alerts_for(failure), 1, "exactly one alert across both pods");
    assert_eq!(
        provider.calls("slack").len(),
        18,
        "nothing retries a dead reply"
    );
}

#[tokio::test]
async fn admins_list_and_retry_dead_letters_and_nobody_else_can() {
    let app = TestApp::builder().fake_provider().build().await;
    let (pod, db, provider) = (app.pod(0), &app.db, app.provider());
    let org = app.org().await;
    let admin = pod.as_user(&org.token);
    let refused = json!({"ok": false, "error": "channel_not_found"});
    provider.always(Some(ResponseTemplate::new(200).set_body_json(refused)));
    let mut outboxes = Vec::new();
    for _ in 0..3 {
        let item = seed_item(db, org.id, "slack", org.conns["slack"], reply_to()).await;
        outboxes.push(admin.release_ok(item, None).await);
    }
    for outbox in &outboxes {
        wait_outbox(db, *outbox, "failed").await;
    }

    // Listing: newest first, paged, filtered.
    let (status, page1) = admin.get("/dead-letters?limit=2").await;
    assert_eq!(status, 200, "{page1}");
    assert_eq!(page1["items"].as_array().unwrap().len(), 2);
    let cursor = page1["next_cursor"].as_str().unwrap();
    let (_, page2) = admin
        .get(&format!("/dead-letters?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(page2["items"].as_array().unwrap().len(), 1);
    assert!(page2["next_cursor"].is_null());
    let first = &page1["items"][0];
    assert_eq!(first["status"], "queued");
    assert_eq!(first["channel"], "slack");
    assert_eq!(first["provider_status"], 200);
    assert!(
        first["error"]
            .as_str()
            .unwrap()
            .contains("channel_not_found")
    );
    let path = format!("/dead-letters?org_id={}&status=dead", org.id);
    assert_eq!(admin.get(&path).await.1["items"], json!([]));
    assert_eq!(admin.get("/dead-letters?status=nope").await.0, 422);

    // Experts of the org and admins of another org see nothing and retry nothing.
    let expert_token = app.member(Some(org.id), Role::Expert).await.token;
    let other_token = app.member(None, Role::Admin).await.token;
    let (expert, other_admin) = (pod.as_user(&expert_token), pod.as_user(&other_token));
    let id = first["id"].as_str().unwrap().to_owned();
    let retry = format!("/dead-letters/{id}/retry");
    assert_eq!(expert.get("/dead-letters").await.0, 403);
    let scoped = format!("/dead-letters?org_id={}", org.id);
    assert_eq!(other_admin.get(&scoped).await.0, 403);
    assert_eq!(other_admin.get("/dead-letters").await.1["items"], json!([]));
    assert_eq!(expert.post_empty(&retry).await.0, 403);
    assert_eq!(other_admin.post_empty(&retry).await.0, 403);
    let unknown = format!("/dead-letters/{}/retry", Uuid::new_v4());
    assert_eq!(admin.post_empty(&unknown).await.0, 404);

    // The admin's retry goes out at once, is audited, and resolves the dead letter.
    provider.always(None);
    let (status, retried) = admin.post_empty(&retry).await;
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["status"], "retrying");
    let outbox: Uuid = first["outbox_id"].as_str().unwrap().parse().unwrap();
    let sent = wait_outbox(db, outbox, "sent").await;
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
    let resolved =
        format!("SELECT count(*) FROM channel_failures WHERE id = '{id}' AND status = 'resolved'");
    assert_eq!(db.wait_for_count(&resolved, 1).await, 1);
    let (status, again) = admin.post_empty(&retry).await;
    assert_eq!((status, again["code"].as_str()), (409, Some("conflict")));
    assert_eq!(again["current"]["status"], "resolved");
    let audited = format!(
        "SELECT count(*) FROM audit_log WHERE action = 'dead_letter.retry' AND target_id = '{id}'
           AND org_id = '{}' AND request_id IS NOT NULL",
        org.id
    );
    assert_eq!(db.count(&audited).await, 1);
    // The other two were not touched.
    let failed = "SELECT count(*) FROM outbox WHERE status = 'failed'";
    assert_eq!(db.count(failed).await, 2);
    assert_eq!(
        delivery(db, outbox).await.provider_id.as_deref(),
        Some("1700000100.000001")
    );
}
