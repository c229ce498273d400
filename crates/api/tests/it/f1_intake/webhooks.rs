//! The webhook endpoint: one message and one draft per provider message however often it
//! is delivered, rejected requests leave no trace, and a deleted connection stops at once
//! on every pod.

use serde_json::json;
use switchboard_domain::ChannelKind;
use switchboard_testing::signing::{
    self, SLACK_SECRET, Signed, TELEGRAM_SECRET, WHATSAPP_TOKEN, WHSEC,
};
use switchboard_testing::{CHANNELS, TestApp, redis_keys, settled};
use uuid::Uuid;

fn signed_for(channel: &str, conn: Uuid, n: i64) -> Signed {
    match channel.parse::<ChannelKind>().expect("a channel") {
        ChannelKind::Slack => signing::slack(
            SLACK_SECRET,
            &format!("Ev{n}"),
            "U1",
            &format!("1700000000.{n:06}"),
            "hello from slack",
        ),
        ChannelKind::Whatsapp => signing::whatsapp(
            WHATSAPP_TOKEN,
            "AC123",
            &format!("https://switchboard.test/webhooks/whatsapp/{conn}"),
            &format!("SM{n}"),
            "whatsapp:+15551234567",
            "hello from whatsapp",
        ),
        ChannelKind::Telegram => signing::telegram(TELEGRAM_SECRET, n, 4242, "hello from telegram"),
        ChannelKind::Email => signing::email(
            WHSEC,
            &format!("msg_{n}"),
            &format!("<m{n}@mail.test>"),
            "Ann <ann@example.test>",
            "hello from email",
        ),
    }
}

#[tokio::test]
async fn each_channel_resent_100_times_across_two_pods_makes_one_message_and_one_draft() {
    let app = TestApp::builder().pods(2).fake_agent().build().await;
    let db = &app.db;
    let org = app.org().await;
    for channel in CHANNELS {
        let signed = signed_for(channel, org.conns[channel], 1);
        let path = org.webhook(channel);
        let sends = (0..100).map(|i| app.pod(i % 2).send_webhook(&path, &signed));
        let results = futures::future::join_all(sends).await;
        for (status, body) in &results {
            assert_eq!(*status, 200, "{channel}: {body}");
        }
        let accepted = results
            .iter()
            .filter(|(_, b)| b.contains("accepted"))
            .count();
        assert_eq!(accepted, 1, "{channel}: exactly one delivery is new");
    }
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, 4);
    assert_eq!(db.wait_for_count("SELECT count(*) FROM drafts", 4).await, 4);
    assert_eq!(db.count("SELECT count(*) FROM messages").await, 4);
    assert_eq!(
        db.count("SELECT count(*) FROM expert_queue WHERE status = 'pending'")
            .await,
        4
    );
    assert_eq!(
        db.count("SELECT count(*) FROM inbound_events WHERE processed_at IS NULL")
            .await,
        0
    );
    assert_eq!(
        db.count("SELECT count(*) FROM drafts WHERE fallback").await,
        0
    );
    let texts = db
        .count("SELECT count(*) FROM messages WHERE body LIKE 'hello from %'")
        .await;
    assert_eq!(texts, 4);
}

#[tokio::test]
async fn rejected_webhooks_write_nothing_anywhere() {
    let app = TestApp::builder().fake_agent().build().await;
    let (p, db) = (app.pod(0), &app.db);
    let org = app.org().await;
    let (slack, telegram) = (org.conns["slack"], org.conns["telegram"]);
    let path = org.webhook("slack");
    let good = signed_for("slack", slack, 7);
    let now = chrono::Utc::now().timestamp();

    let mut tampered = signed_for("slack", slack, 7);
    tampered.body[10] ^= 1;
    let mut unsigned = signed_for("slack", slack, 7);
    unsigned.headers.retain(|(k, _)| *k != "x-slack-signature");
    let stale = signing::slack_raw(SLACK_SECRET, now - 301, good.body.clone());
    let wrong_secret = signing::slack_raw("another-secret", now, good.body.clone());
    let garbage = signing::slack_raw(SLACK_SECRET, now, b"{not json".to_vec());
    let huge = signing::slack_raw(SLACK_SECRET, now, vec![b' '; 70 * 1024]);
    let mut wrong_token = signed_for("telegram", telegram, 9);
    wrong_token
        .headers
        .retain(|(k, _)| *k != "x-telegram-bot-api-secret-token");
    wrong_token
        .headers
        .push(("x-telegram-bot-api-secret-token", "nope".into()));

    let cases = [
        (path.clone(), tampered, 401, "invalid_signature"),
        (path.clone(), unsigned, 401, "invalid_signature"),
        (path.clone(), wrong_secret, 401, "invalid_signature"),
        (path.clone(), stale, 401, "stale_timestamp"),
        (path.clone(), garbage, 400, "malformed_payload"),
        (path.clone(), huge, 413, "payload_too_large"),
        (
            org.webhook("telegram"),
            wrong_token,
            401,
            "invalid_signature",
        ),
        (
            format!("/webhooks/slack/{}", Uuid::new_v4()),
            signed_for("slack", slack, 7),
            404,
            "not_found",
        ),
        (
            format!("/webhooks/telegram/{slack}"),
            signed_for("telegram", slack, 7),
            404,
            "not_found",
        ),
        (
            format!("/webhooks/fax/{slack}"),
            signed_for("slack", slack, 7),
            404,
            "not_found",
        ),
    ];
    for (path, signed, status, code) in cases {
        let (got, body) = p.send_webhook(&path, &signed).await;
        assert_eq!(got, status, "{path}: {body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["code"], code, "{path}");
    }
    assert_eq!(db.count("SELECT count(*) FROM inbound_events").await, 0);
    let keys = redis_keys(&format!("{}:dedup:*", app.prefix)).await;
    assert!(
        keys.is_empty(),
        "no dedup keys for rejected requests: {keys:?}"
    );

    // The good one still goes through afterwards.
    let (status, body) = p.send_webhook(&path, &good).await;
    assert_eq!((status, body.contains("accepted")), (200, true), "{body}");
}

#[tokio::test]
async fn slack_url_verification_answers_the_challenge() {
    let app = TestApp::builder().fake_agent().build().await;
    let path = app.org().await.webhook("slack");
    let body = serde_json::to_vec(
        &json!({"type": "url_verification", "token": "t", "challenge": "c-123"}),
    )
    .unwrap();
    let signed = signing::slack_raw(SLACK_SECRET, chrono::Utc::now().timestamp(), body);
    let (status, text) = app.pod(0).send_webhook(&path, &signed).await;
    assert_eq!((status, text.as_str()), (200, "c-123"));
    assert_eq!(app.db.count("SELECT count(*) FROM inbound_events").await, 0);
}

#[tokio::test]
async fn a_batch_insert_stores_each_key_once_and_reports_duplicates_in_order() {
    use switchboard_domain::ChannelKind;
    use switchboard_store::inbox::{NewEvent, insert_batch};
    let app = TestApp::builder().fake_agent().build().await;
    let org = app.org().await;
    let event = |key: &str| NewEvent {
        org_id: org.id,
        connection_id: org.conns["slack"],
        channel: ChannelKind::Slack,
        dedup_key: key.into(),
        payload: json!({"message": null}),
        processed: true,
        traceparent: None,
        arrived_at: chrono::Utc::now(),
    };
    let pool = app.db.pool().await;
    let first = insert_batch(&pool, &[event("a")], "pod-t").await.unwrap();
    assert!(first[0].is_some());
    let ids = insert_batch(
        &pool,
        &[event("b"), event("a"), event("b"), event("c")],
        "pod-t",
    )
    .await
    .unwrap();
    let new: Vec<bool> = ids.iter().map(Option::is_some).collect();
    assert_eq!(new, [true, false, false, true]);
    assert_eq!(app.db.count("SELECT count(*) FROM inbound_events").await, 3);
}

/// Pods cache connections for the webhook path; a delete on one pod reaches the others'
/// caches through Redis at once, not when the entry expires.
#[tokio::test]
async fn a_connection_deleted_on_one_pod_stops_webhooks_on_every_pod() {
    let app = TestApp::builder().pods(2).fake_agent().build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org().await;
    let slack = org.conns["slack"];
    let path = org.webhook("slack");
    // Warm B's cache (retrying until B's subscription is live and the entry is cached).
    for i in 0..3 {
        let (status, _) = b
            .send_webhook(&path, &signed_for("slack", slack, 100 + i))
            .await;
        assert_eq!(status, 200);
    }
    let admin = app
        .member(Some(org.id), switchboard_domain::Role::Admin)
        .await;
    let status = a
        .as_user(&admin.token)
        .delete(&format!("/channel-connections/{slack}"))
        .await;
    assert_eq!(status, 204);
    let started = std::time::Instant::now();
    let n = std::cell::Cell::new(200);
    let resend = || async {
        n.set(n.get() + 1);
        b.send_webhook(&path, &signed_for("slack", slack, n.get()))
            .await
            .0
    };
    let status = settled(std::time::Duration::from_secs(5), resend, |s| *s == 404).await;
    assert_eq!(
        status, 404,
        "B still accepts webhooks for a deleted connection"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
