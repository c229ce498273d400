use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{TestApp, TestDb};

fn slack(org: uuid::Uuid, name: &str) -> Value {
    json!({
        "org_id": org, "channel": "slack", "name": name,
        "secrets": {"signing_secret": "sign-SECRET-123", "bot_token": "xoxb-SECRET-456"},
        "settings": {"team": "T1"}
    })
}

async fn count(db: &TestDb, table: &str) -> i64 {
    db.count(&format!("SELECT count(*) FROM {table}")).await
}

#[tokio::test]
async fn crud_never_returns_secrets() {
    let app = TestApp::builder().build().await;
    let admin = app.member(None, Role::Admin).await;
    let user = app.pod(0).as_user(&admin.token);

    let r = user
        .request(reqwest::Method::POST, "/channel-connections")
        .json(&slack(admin.org, "support"))
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
    let pool = app.db.pool().await;
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
        let r = user
            .request(reqwest::Method::GET, &path)
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
    let (status, _) = user
        .post("/channel-connections", slack(admin.org, "support"))
        .await;
    assert_eq!(status, 409);
    assert_eq!(count(&app.db, "channel_connections").await, 1);

    let path = format!("/channel-connections/{id}");
    assert_eq!(user.delete(&path).await, 204);
    assert_eq!(user.get(&path).await.0, 404);
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
    let app = TestApp::builder().build().await;
    let admin = app.member(None, Role::Admin).await;
    let (org, user) = (admin.org, app.pod(0).as_user(&admin.token));
    let bad = [
        json!({"org_id": org, "channel": "fax", "name": "x", "secrets": {}}),
        json!({"org_id": org, "channel": "slack", "name": "x", "secrets": {"bot_token": "b"}}),
        json!({"org_id": org, "channel": "telegram", "name": "x", "secrets": {"bot_token": "b", "secret_token": "s", "extra": "e"}}),
        json!({"org_id": org, "channel": "email", "name": " ", "secrets": {"webhook_secret": "w", "api_key": "k", "from_address": "a@b.c"}}),
        json!({"org_id": org, "channel": "whatsapp", "name": "x", "secrets": {"account_sid": "a", "auth_token": "t", "from_number": "+1"}, "settings": [1]}),
    ];
    for body in bad {
        let (status, err) = user.post("/channel-connections", body.clone()).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(err["code"], "validation_failed");
    }
    let (status, _) = user
        .post(
            "/channel-connections",
            json!({"org_id": org, "channel": "slack"}),
        )
        .await;
    assert_eq!(
        status, 400,
        "missing fields is malformed JSON for this endpoint"
    );
    assert_eq!(count(&app.db, "channel_connections").await, 0);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM audit_log WHERE action NOT LIKE 'auth.%'")
            .await,
        0
    );
}

#[tokio::test]
async fn other_orgs_and_experts_get_403() {
    let app = TestApp::builder().build().await;
    let admin_a = app.member(None, Role::Admin).await;
    let admin_b = app.member(None, Role::Admin).await;
    let expert_a = app.member(Some(admin_a.org), Role::Expert).await;
    let pod = app.pod(0);
    let (a, b, expert) = (
        pod.as_user(&admin_a.token),
        pod.as_user(&admin_b.token),
        pod.as_user(&expert_a.token),
    );
    let org_a = admin_a.org;

    let (_, created) = a
        .post("/channel-connections", slack(org_a, "a-support"))
        .await;
    let path = format!("/channel-connections/{}", created["id"].as_str().unwrap());

    // Admin of B on A's connection, and on A's org.
    let (status, body) = b.get(&path).await;
    assert_eq!(status, 403);
    assert_eq!(body["code"], "forbidden");
    assert_eq!(b.delete(&path).await, 403);
    let (status, _) = b
        .post("/channel-connections", slack(org_a, "intruder"))
        .await;
    assert_eq!(status, 403);
    let list = format!("/channel-connections?org_id={org_a}");
    assert_eq!(b.get(&list).await.0, 403);
    let (_, own) = b.get("/channel-connections").await;
    assert_eq!(own["items"], json!([]), "B sees none of A's connections");

    // An expert of A cannot manage connections either.
    assert_eq!(expert.delete(&path).await, 403);
    assert_eq!(a.get(&path).await.0, 200, "nothing was deleted");
}
