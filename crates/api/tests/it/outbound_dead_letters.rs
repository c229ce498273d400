//! Dead letters: the dead-letter worker's retries until `dead` with exactly one alert
//! across pods, and the admin endpoints (list, retry, audit, 403 for everyone else).

use crate::outbound_alerts::capture;
use crate::outbound_support::{
    Provider, alerts_for, delivery, org, pod, release_ok, seed_item, wait_outbox,
};
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::{TestDb, TestPod, random_prefix, seed_member};
use uuid::Uuid;
use wiremock::ResponseTemplate;

fn reply_to() -> Value {
    json!({"channel": "C1", "thread_ts": "1700000000.000100"})
}

#[tokio::test]
async fn a_reply_that_always_fails_is_retried_five_times_then_dead_with_one_alert() {
    capture();
    let db = TestDb::fresh().await;
    let provider = Provider::start().await;
    let prefix = random_prefix();
    let fast = [
        ("DEAD_LETTER_INTERVAL_MS", "200"),
        ("DEAD_LETTER_BACKOFF_MS", "50"),
    ];
    let a = pod(&db, &prefix, &provider, "http://127.0.0.1:9", &fast).await;
    let _b = pod(&db, &prefix, &provider, "http://127.0.0.1:9", &fast).await;
    let org = org(&db, &a).await;
    let item = seed_item(&db, org.id, "slack", org.conns["slack"], reply_to()).await;
    provider.always(Some(ResponseTemplate::new(500)));
    let outbox = release_ok(&a, &org.token, item, None).await;

    let dead = wait_outbox(&db, outbox, "dead").await;
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
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(alerts_for(failure), 1, "exactly one alert across both pods");
    assert_eq!(
        provider.calls("slack").len(),
        18,
        "nothing retries a dead reply"
    );
}

async fn get(pod: &TestPod, token: &str, path: &str) -> (u16, Value) {
    let r = pod
        .client
        .get(pod.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn post(pod: &TestPod, token: &str, path: &str) -> (u16, Value) {
    let r = pod
        .client
        .post(pod.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn admins_list_and_retry_dead_letters_and_nobody_else_can() {
    let db = TestDb::fresh().await;
    let provider = Provider::start().await;
    let pod = pod(&db, &random_prefix(), &provider, "http://127.0.0.1:9", &[]).await;
    let org = org(&db, &pod).await;
    let refused = json!({"ok": false, "error": "channel_not_found"});
    provider.always(Some(ResponseTemplate::new(200).set_body_json(refused)));
    let mut outboxes = Vec::new();
    for _ in 0..3 {
        let item = seed_item(&db, org.id, "slack", org.conns["slack"], reply_to()).await;
        outboxes.push(release_ok(&pod, &org.token, item, None).await);
    }
    for outbox in &outboxes {
        wait_outbox(&db, *outbox, "failed").await;
    }

    // Listing: newest first, paged, filtered.
    let (status, page1) = get(&pod, &org.token, "/dead-letters?limit=2").await;
    assert_eq!(status, 200, "{page1}");
    assert_eq!(page1["items"].as_array().unwrap().len(), 2);
    let cursor = page1["next_cursor"].as_str().unwrap();
    let (_, page2) = get(
        &pod,
        &org.token,
        &format!("/dead-letters?limit=2&cursor={cursor}"),
    )
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
    assert_eq!(get(&pod, &org.token, &path).await.1["items"], json!([]));
    assert_eq!(
        get(&pod, &org.token, "/dead-letters?status=nope").await.0,
        422
    );

    // Experts of the org and admins of another org see nothing and retry nothing.
    let (_, expert_email, password) = seed_member(&db, Some(org.id), Role::Expert).await;
    let expert = pod.login(&expert_email, &password).await;
    let (_, other_email, password) = seed_member(&db, None, Role::Admin).await;
    let other_admin = pod.login(&other_email, &password).await;
    let id = first["id"].as_str().unwrap().to_owned();
    let retry = format!("/dead-letters/{id}/retry");
    assert_eq!(get(&pod, &expert, "/dead-letters").await.0, 403);
    let scoped = format!("/dead-letters?org_id={}", org.id);
    assert_eq!(get(&pod, &other_admin, &scoped).await.0, 403);
    assert_eq!(
        get(&pod, &other_admin, "/dead-letters").await.1["items"],
        json!([])
    );
    assert_eq!(post(&pod, &expert, &retry).await.0, 403);
    assert_eq!(post(&pod, &other_admin, &retry).await.0, 403);
    let unknown = format!("/dead-letters/{}/retry", Uuid::new_v4());
    assert_eq!(post(&pod, &org.token, &unknown).await.0, 404);

    // The admin's retry goes out at once, is audited, and resolves the dead letter.
    provider.always(None);
    let (status, retried) = post(&pod, &org.token, &retry).await;
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["status"], "retrying");
    let outbox: Uuid = first["outbox_id"].as_str().unwrap().parse().unwrap();
    let sent = wait_outbox(&db, outbox, "sent").await;
    assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
    let resolved =
        format!("SELECT count(*) FROM channel_failures WHERE id = '{id}' AND status = 'resolved'");
    assert_eq!(db.wait_for_count(&resolved, 1).await, 1);
    let (status, again) = post(&pod, &org.token, &retry).await;
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
        delivery(&db, outbox).await.provider_id.as_deref(),
        Some("1700000100.000001")
    );
}
