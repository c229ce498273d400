use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{TestPod, seed_member};

fn slack(org: uuid::Uuid, name: &str) -> Value {
    json!({
        "org_id": org, "channel": "slack", "name": name,
        "secrets": {"signing_secret": "sign-SECRET-123", "bot_token": "xoxb-SECRET-456"},
        "settings": {"team": "T1"}
    })
}

async fn count(db: &switchboard_testing::TestDb, table: &str) -> i64 {
    db.count(&format!("SELECT count(*) FROM {table}")).await
}

#[tokio::test]
async fn crud_never_returns_secrets() {
    let (pod, db) = TestPod::single().await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = pod.login(&email, &password).await;

    let r = pod
        .client
        .post(pod.url("/channel-connections"))
        .bearer_auth(&token)
        .json(&slack(org, "support"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let text = r.text().await.unwrap();
    assert!(!text.contains("SECRET"), "secrets leaked: {text}");
    let created: Value = serde_json::from_str(&text).unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(
        created["webhook_url"],
        format!("https://switchboard.test/webhooks/slack/{id}")
    );
    assert_eq!(created["settings"], json!({"team": "T1"}));

    // At rest: ciphertext only.
    let pool = db.pool().await;
    let stored: Vec<u8> = sqlx::query_scalar(
        "SELECT secrets_ciphertext FROM channel_connections WHERE id = $1::uuid",
    )
    .bind(&id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(!stored.windows(6).any(|w| w == b"SECRET"));

    for path in [
        "/channel-connections".to_owned(),
        format!("/channel-connections/{id}"),
    ] {
        let r = pod
            .client
            .get(pod.url(&path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        assert!(
            text.contains(&id) && !text.contains("SECRET"),
            "{path}: {text}"
        );
    }

    // Same name again: 409, nothing new written.
    let r = pod
        .client
        .post(pod.url("/channel-connections"))
        .bearer_auth(&token)
        .json(&slack(org, "support"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(count(&db, "channel_connections").await, 1);

    let r = pod
        .client
        .delete(pod.url(&format!("/channel-connections/{id}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = pod
        .client
        .get(pod.url(&format!("/channel-connections/{id}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let actions: Vec<String> = sqlx::query_scalar(
        "SELECT action FROM audit_log WHERE action NOT LIKE 'auth.%' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        actions,
        ["channel_connection.created", "channel_connection.deleted"]
    );
}

#[tokio::test]
async fn invalid_connections_are_rejected_and_write_nothing() {
    let (pod, db) = TestPod::single().await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = pod.login(&email, &password).await;
    let bad = [
        json!({"org_id": org, "channel": "fax", "name": "x", "secrets": {}}),
        json!({"org_id": org, "channel": "slack", "name": "x", "secrets": {"bot_token": "b"}}),
        json!({"org_id": org, "channel": "telegram", "name": "x", "secrets": {"bot_token": "b", "secret_token": "s", "extra": "e"}}),
        json!({"org_id": org, "channel": "email", "name": " ", "secrets": {"webhook_secret": "w", "api_key": "k", "from_address": "a@b.c"}}),
        json!({"org_id": org, "channel": "whatsapp", "name": "x", "secrets": {"account_sid": "a", "auth_token": "t", "from_number": "+1"}, "settings": [1]}),
    ];
    for body in bad {
        let r = pod
            .client
            .post(pod.url("/channel-connections"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{body}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["code"], "validation_failed");
    }
    let r = pod
        .client
        .post(pod.url("/channel-connections"))
        .bearer_auth(&token)
        .json(&json!({"org_id": org, "channel": "slack"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        400,
        "missing fields is malformed JSON for this endpoint"
    );
    assert_eq!(count(&db, "channel_connections").await, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM audit_log WHERE action NOT LIKE 'auth.%'")
            .await,
        0
    );
}

#[tokio::test]
async fn other_orgs_and_experts_get_403() {
    let (pod, db) = TestPod::single().await;
    let (org_a, admin_a, pw_a) = seed_member(&db, None, Role::Admin).await;
    let (org_b, admin_b, pw_b) = seed_member(&db, None, Role::Admin).await;
    let (_, expert_a, pw_e) = seed_member(&db, Some(org_a), Role::Expert).await;
    let token_a = pod.login(&admin_a, &pw_a).await;
    let token_b = pod.login(&admin_b, &pw_b).await;
    let token_e = pod.login(&expert_a, &pw_e).await;

    let created: Value = pod
        .client
        .post(pod.url("/channel-connections"))
        .bearer_auth(&token_a)
        .json(&slack(org_a, "a-support"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!("/channel-connections/{}", created["id"].as_str().unwrap());

    // Admin of B on A's connection, and on A's org.
    let get = pod
        .client
        .get(pod.url(&path))
        .bearer_auth(&token_b)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 403);
    let body: Value = get.json().await.unwrap();
    assert_eq!(body["code"], "forbidden");
    let del = pod
        .client
        .delete(pod.url(&path))
        .bearer_auth(&token_b)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 403);
    let create = pod
        .client
        .post(pod.url("/channel-connections"))
        .bearer_auth(&token_b)
        .json(&slack(org_a, "intruder"))
        .send()
        .await
        .unwrap();
    assert_eq!(create.status(), 403);
    let list = pod
        .client
        .get(pod.url(&format!("/channel-connections?org_id={org_a}")))
        .bearer_auth(&token_b)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 403);
    let own: Value = pod
        .client
        .get(pod.url("/channel-connections"))
        .bearer_auth(&token_b)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(own["items"], json!([]), "B sees none of A's connections");
    let _ = org_b;

    // An expert of A cannot manage connections either.
    let r = pod
        .client
        .delete(pod.url(&path))
        .bearer_auth(&token_e)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let still = pod
        .client
        .get(pod.url(&path))
        .bearer_auth(&token_a)
        .send()
        .await
        .unwrap();
    assert_eq!(still.status(), 200, "nothing was deleted");
}
