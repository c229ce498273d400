use crate::inbound_support::{agent, connections, count, pod, send, wait_for_count};
use serde_json::json;
use switchboard_testing::signing::{self, Signed};
use switchboard_testing::{TestDb, random_prefix, redis_url};

fn signed_for(channel: &str, conn: &str, n: i64) -> Signed {
    match channel {
        "slack" => signing::slack(
            "slack-signing-secret",
            &format!("Ev{n}"),
            "U1",
            &format!("1700000000.{n:06}"),
            "hello from slack",
        ),
        "whatsapp" => signing::twilio(
            "twilio-token",
            "AC123",
            &format!("https://switchboard.test/webhooks/whatsapp/{conn}"),
            &format!("SM{n}"),
            "whatsapp:+15551234567",
            "hello from whatsapp",
        ),
        "telegram" => signing::telegram("tg-secret-0123456789", n, 4242, "hello from telegram"),
        _ => signing::email(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            &format!("msg_{n}"),
            &format!("<m{n}@mail.test>"),
            "Ann <ann@example.test>",
            "hello from email",
        ),
    }
}

#[tokio::test]
async fn each_channel_resent_100_times_across_two_pods_makes_one_message_and_one_draft() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let agent = agent().await;
    let a = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let b = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let (_, conns) = connections(&db, &a).await;
    for (channel, id) in &conns {
        let signed = signed_for(channel, id, 1);
        let path = format!("/webhooks/{channel}/{id}");
        let sends = (0..100).map(|i| {
            let target = if i % 2 == 0 { &a } else { &b };
            send(target, &path, &signed)
        });
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
    assert_eq!(count(&db, "SELECT count(*) FROM inbound_events").await, 4);
    assert_eq!(
        wait_for_count(&db, "SELECT count(*) FROM drafts", 4).await,
        4
    );
    assert_eq!(count(&db, "SELECT count(*) FROM messages").await, 4);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM expert_queue WHERE status = 'pending'"
        )
        .await,
        4
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM inbound_events WHERE processed_at IS NULL"
        )
        .await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM drafts WHERE fallback").await,
        0
    );
    let texts = count(
        &db,
        "SELECT count(*) FROM messages WHERE body LIKE 'hello from %'",
    )
    .await;
    assert_eq!(texts, 4);
}

#[tokio::test]
async fn rejected_webhooks_write_nothing_anywhere() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let agent = agent().await;
    let p = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let slack = &conns[0].1;
    let telegram = &conns[2].1;
    let path = format!("/webhooks/slack/{slack}");
    let good = signed_for("slack", slack, 7);
    let now = chrono::Utc::now().timestamp();

    let mut tampered = signed_for("slack", slack, 7);
    tampered.body[10] ^= 1;
    let mut unsigned = signed_for("slack", slack, 7);
    unsigned.headers.retain(|(k, _)| k != "x-slack-signature");
    let stale = signing::slack_raw("slack-signing-secret", now - 301, good.body.clone());
    let wrong_secret = signing::slack_raw("another-secret", now, good.body.clone());
    let garbage = signing::slack_raw("slack-signing-secret", now, b"{not json".to_vec());
    let huge = signing::slack_raw("slack-signing-secret", now, vec![b' '; 70 * 1024]);
    let mut wrong_token = signed_for("telegram", telegram, 9);
    wrong_token
        .headers
        .retain(|(k, _)| k != "x-telegram-bot-api-secret-token");
    wrong_token
        .headers
        .push(("x-telegram-bot-api-secret-token".into(), "nope".into()));

    let cases = [
        (path.clone(), tampered, 401, "invalid_signature"),
        (path.clone(), unsigned, 401, "invalid_signature"),
        (path.clone(), wrong_secret, 401, "invalid_signature"),
        (path.clone(), stale, 401, "stale_timestamp"),
        (path.clone(), garbage, 400, "malformed_payload"),
        (path.clone(), huge, 413, "payload_too_large"),
        (
            format!("/webhooks/telegram/{telegram}"),
            wrong_token,
            401,
            "invalid_signature",
        ),
        (
            format!("/webhooks/slack/{}", uuid::Uuid::new_v4()),
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
        let (got, body) = send(&p, &path, &signed).await;
        assert_eq!(got, status, "{path}: {body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["code"], code, "{path}");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM inbound_events").await, 0);
    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:dedup:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        keys.is_empty(),
        "no dedup keys for rejected requests: {keys:?}"
    );

    // The good one still goes through afterwards.
    let (status, body) = send(&p, &path, &good).await;
    assert_eq!((status, body.contains("accepted")), (200, true), "{body}");
}

#[tokio::test]
async fn slack_url_verification_answers_the_challenge() {
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let p = pod(&db, &redis_url(), &random_prefix(), &agent.uri()).await;
    let (_, conns) = connections(&db, &p).await;
    let body = serde_json::to_vec(
        &json!({"type": "url_verification", "token": "t", "challenge": "c-123"}),
    )
    .unwrap();
    let signed = signing::slack_raw("slack-signing-secret", chrono::Utc::now().timestamp(), body);
    let (status, text) = send(&p, &format!("/webhooks/slack/{}", conns[0].1), &signed).await;
    assert_eq!((status, text.as_str()), (200, "c-123"));
    assert_eq!(count(&db, "SELECT count(*) FROM inbound_events").await, 0);
}

#[tokio::test]
async fn a_batch_insert_stores_each_key_once_and_reports_duplicates_in_order() {
    use switchboard_domain::ChannelKind;
    use switchboard_store::inbox::{NewEvent, insert_batch};
    let db = TestDb::fresh().await;
    let agent = agent().await;
    let p = pod(&db, &redis_url(), &random_prefix(), &agent.uri()).await;
    let (org, conns) = connections(&db, &p).await;
    let conn: uuid::Uuid = conns[0].1.parse().unwrap();
    let event = |key: &str| NewEvent {
        org_id: org,
        connection_id: conn,
        channel: ChannelKind::Slack,
        dedup_key: key.into(),
        payload: json!({"message": null}),
        processed: true,
    };
    let pool = db.pool().await;
    let first = insert_batch(&pool, &[event("a")]).await.unwrap();
    assert!(first[0].is_some());
    let ids = insert_batch(&pool, &[event("b"), event("a"), event("b"), event("c")])
        .await
        .unwrap();
    let new: Vec<bool> = ids.iter().map(Option::is_some).collect();
    assert_eq!(new, [true, false, false, true]);
    assert_eq!(count(&db, "SELECT count(*) FROM inbound_events").await, 3);
}

/// Pods cache connections for the webhook path; a delete on one pod reaches the others'
/// caches through Redis at once, not when the entry expires.
#[tokio::test]
async fn a_connection_deleted_on_one_pod_stops_webhooks_on_every_pod() {
    use switchboard_domain::Role;
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let agent = agent().await;
    let a = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let b = pod(&db, &redis_url(), &prefix, &agent.uri()).await;
    let (org, conns) = connections(&db, &a).await;
    let slack = &conns[0].1;
    let path = format!("/webhooks/slack/{slack}");
    // Warm B's cache (retrying until B's subscription is live and the entry is cached).
    for i in 0..3 {
        let (status, _) = send(&b, &path, &signed_for("slack", slack, 100 + i)).await;
        assert_eq!(status, 200);
    }
    let (_, email, password) = switchboard_testing::seed_member(&db, Some(org), Role::Admin).await;
    let token = a.login(&email, &password).await;
    let r = a
        .client
        .delete(a.url(&format!("/channel-connections/{slack}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let started = std::time::Instant::now();
    let mut status = 0;
    for i in 0..50 {
        status = send(&b, &path, &signed_for("slack", slack, 200 + i))
            .await
            .0;
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        status, 404,
        "B still accepts webhooks for a deleted connection"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
