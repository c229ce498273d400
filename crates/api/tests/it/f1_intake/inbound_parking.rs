//! Poison events are parked (not retried for ever, not in the sweeper's way), visible and
//! replayable by org admins; processed events are pruned after their retention.

use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{TestApp, TestDb, User};
use uuid::Uuid;

/// Inserts an event as the webhook path would have, received `age` ago, with no job queued
/// (as if Redis lost it); returns its id.
async fn lost_event(
    db: &TestDb,
    org: Uuid,
    conn: Uuid,
    key: &str,
    payload: Value,
    age: &str,
) -> Uuid {
    let pool = db.pool().await;
    let id = sqlx::query_scalar(
        "INSERT INTO inbound_events (org_id, connection_id, channel, dedup_key, payload, received_at)
         VALUES ($1, $2, 'slack', $3, $4, now() - $5::interval) RETURNING id",
    )
    .bind(org)
    .bind(conn)
    .bind(key)
    .bind(payload)
    .bind(age)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    id
}

fn message(conn: Uuid, id: &str, text: &str) -> Value {
    json!({"message": {"customer_external_id": "U5", "customer_name": null, "text": text,
        "channel_message_id": format!("{conn}:C1:{id}"), "reply_to": {"channel": "C1"}},
        "raw": {"event_id": id}})
}

/// `POST /inbound-events/{id}/replay` as `user`.
async fn replay(user: User<'_>, id: Uuid) -> (u16, Value) {
    user.post_empty(&format!("/inbound-events/{id}/replay"))
        .await
}

/// More failing events than the sweeper takes per slot, all older than a lost good one:
/// they are parked after their attempts, and the lost event behind them is processed.
#[tokio::test]
async fn poison_events_are_parked_counted_and_replayable_and_never_block_the_sweeper() {
    let app = TestApp::builder()
        .fake_agent()
        .env("INBOX_MAX_ATTEMPTS", "2")
        .env("INBOX_RETRY_BASE_SECS", "0")
        .env("INBOX_SWEEP_BATCH", "3")
        .build()
        .await;
    let (p, db) = (app.pod(0), &app.db);
    let (org, conn) = {
        let org = app.org().await;
        (org.id, org.conns["slack"])
    };
    let mut poison = Vec::new();
    for i in 0..4 {
        let broken = json!({"message": 5, "raw": {"n": i}});
        poison.push(lost_event(db, org, conn, &format!("P{i}"), broken, "1 hour").await);
    }
    let lost = lost_event(
        db,
        org,
        conn,
        "L1",
        message(conn, "L1", "still here?"),
        "10 minutes",
    )
    .await;

    let parked = "SELECT count(*) FROM inbound_events WHERE parked_at IS NOT NULL";
    assert_eq!(db.wait_for_count(parked, 4).await, 4);
    let found = "SELECT count(*) FROM messages WHERE body = 'still here?'";
    assert_eq!(
        db.wait_for_count(found, 1).await,
        1,
        "the lost event behind the poison ones is processed"
    );
    let attempts: Vec<i32> =
        sqlx::query_scalar("SELECT attempts FROM inbound_events WHERE parked_at IS NOT NULL")
            .fetch_all(&db.pool().await)
            .await
            .unwrap();
    assert_eq!(
        attempts,
        [2, 2, 2, 2],
        "parked after the cap, not retried further"
    );
    let metrics = p.metrics().await;
    let parked_total: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("inbox_events_parked_total "))
        .expect("parked events are counted")
        .parse()
        .unwrap();
    assert!(parked_total >= 4.0, "{metrics}");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("inbox_events_parked ")),
        "{metrics}"
    );

    // The admin endpoints: list by state, inspect, replay; org-scoped and admin only.
    let admin_token = app.member(Some(org), Role::Admin).await.token;
    let expert_token = app.member(Some(org), Role::Expert).await.token;
    let other_token = app.member(None, Role::Admin).await.token;
    let (admin, expert, other) = (
        p.as_user(&admin_token),
        p.as_user(&expert_token),
        p.as_user(&other_token),
    );

    let (status, page) = admin
        .get("/inbound-events?status=parked&channel=slack")
        .await;
    assert_eq!(status, 200, "{page}");
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{page}");
    assert!(
        items
            .iter()
            .all(|e| e["status"] == "parked" && e["attempts"] == 2)
    );
    assert!(
        items[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("malformed"),
        "{page}"
    );

    let (status, detail) = admin.get(&format!("/inbound-events/{lost}")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["status"], "processed");
    assert_eq!(detail["payload"]["message"]["text"], "still here?");
    assert!(
        detail["message_id"].is_string() && detail["conversation_id"].is_string(),
        "{detail}"
    );

    // Pages of 2 cover all 5 events once, newest first.
    let (mut seen, mut cursor) = (Vec::new(), String::new());
    loop {
        let (status, page) = admin.get(&format!("/inbound-events?limit=2{cursor}")).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].clone()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(seen[0], json!(lost), "newest first");

    for user in [expert, other] {
        let detail = format!("/inbound-events/{}", poison[0]);
        assert_eq!(user.get(&detail).await.0, 403);
        assert_eq!(replay(user, poison[0]).await.0, 403);
    }
    let scoped = format!("/inbound-events?org_id={org}");
    assert_eq!(other.get(&scoped).await.0, 403);
    assert_eq!(
        replay(admin, lost).await.0,
        409,
        "processed: nothing to replay"
    );

    // The cause is fixed (here: the payload); a replay runs the same job again.
    sqlx::query("UPDATE inbound_events SET payload = $2 WHERE id = $1")
        .bind(poison[0])
        .bind(message(conn, "P0", "fixed now"))
        .execute(&db.pool().await)
        .await
        .unwrap();
    let (status, body) = replay(admin, poison[0]).await;
    assert_eq!((status, &body["status"]), (202, &json!("queued")), "{body}");
    let fixed = "SELECT count(*) FROM messages WHERE body = 'fixed now'";
    assert_eq!(db.wait_for_count(fixed, 1).await, 1);
    // The message commits before the agent's draft, which marks the event processed.
    let processed = format!(
        "SELECT count(*) FROM inbound_events WHERE id = '{}' AND processed_at IS NOT NULL",
        poison[0]
    );
    assert_eq!(db.wait_for_count(&processed, 1).await, 1);
    let (_, detail) = admin.get(&format!("/inbound-events/{}", poison[0])).await;
    assert_eq!(detail["status"], "processed", "{detail}");
    assert_eq!(
        db.count("SELECT count(*) FROM audit_log WHERE action = 'inbound_event.replayed' AND request_id IS NOT NULL").await,
        1
    );
}

/// Processed events older than the retention go; recent, unprocessed and parked ones stay.
#[tokio::test]
async fn processed_events_are_pruned_after_their_retention() {
    let app = TestApp::builder()
        .fake_agent()
        .env("INBOX_PRUNE_INTERVAL_MS", "200")
        .no_workers()
        .build()
        .await;
    let db = &app.db;
    let (org, conn) = {
        let org = app.org().await;
        (org.id, org.conns["slack"])
    };
    let none = json!({"message": null, "raw": {}});
    for (key, age) in [
        ("old1", "31 days"),
        ("old2", "40 days"),
        ("new1", "29 days"),
        ("new2", "1 hour"),
    ] {
        let id = lost_event(db, org, conn, key, none.clone(), age).await;
        sqlx::query("UPDATE inbound_events SET processed_at = received_at WHERE id = $1")
            .bind(id)
            .execute(&db.pool().await)
            .await
            .unwrap();
    }
    lost_event(db, org, conn, "stuck", none.clone(), "60 days").await;
    let parked = lost_event(db, org, conn, "parked", none, "60 days").await;
    sqlx::query("UPDATE inbound_events SET parked_at = now(), attempts = 10 WHERE id = $1")
        .bind(parked)
        .execute(&db.pool().await)
        .await
        .unwrap();

    assert_eq!(
        db.wait_for_count("SELECT count(*) FROM inbound_events", 4)
            .await,
        4
    );
    let left: Vec<String> =
        sqlx::query_scalar("SELECT dedup_key FROM inbound_events ORDER BY dedup_key")
            .fetch_all(&db.pool().await)
            .await
            .unwrap();
    assert_eq!(left, ["new1", "new2", "parked", "stuck"]);
    assert!(
        db.count("SELECT count(*) FROM cron_runs WHERE job = 'inbox-retention' AND status = 'ok'")
            .await
            >= 1
    );
}
