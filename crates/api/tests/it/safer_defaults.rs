//! Safer defaults and less leakage: login throttle keys, secrets refused at create, `/ready`
//! without driver text, `/metrics` on its own address.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_domain::Role;
use switchboard_testing::{TestDb, TestPod, random_prefix, redis_url, seed_member};

#[tokio::test]
async fn login_refuses_overlong_emails_first_and_throttles_on_a_hash() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let p = TestPod::start(&db, &prefix).await;
    let long = format!("{}@example.test", "a".repeat(250));
    let r = p
        .client
        .post(p.url("/auth/login"))
        .json(&json!({"email": long, "password": "whatever"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "email_too_long");

    let r = p
        .client
        .post(p.url("/auth/login"))
        .json(&json!({"email": "  Someone@Example.TEST ", "password": "wrong password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let client = switchboard_testing::redis_client(&redis_url());
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:limit:login:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let hash = hex::encode(Sha256::digest(b"someone@example.test"));
    assert_eq!(keys, [format!("{prefix}:limit:login:{hash}")]);
}

#[tokio::test]
async fn secrets_that_cannot_work_are_refused_at_create_naming_the_field() {
    let db = TestDb::fresh().await;
    let p = TestPod::start(&db, &random_prefix()).await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = p.login(&email, &password).await;
    let cases = [
        (
            "telegram",
            json!({"bot_token": "1:abc", "secret_token": "too-short"}),
            "secret_token",
        ),
        (
            "telegram",
            json!({"bot_token": "1:abc", "secret_token": "spaces are not allowed"}),
            "secret_token",
        ),
        (
            "email",
            json!({"webhook_secret": "not-a-whsec", "api_key": "re_1", "from_address": "a@b.c"}),
            "webhook_secret",
        ),
        (
            "email",
            json!({"webhook_secret": "whsec_%%%", "api_key": "re_1", "from_address": "a@b.c"}),
            "webhook_secret",
        ),
    ];
    for (channel, secrets, field) in cases {
        let r = p
            .client
            .post(p.url("/channel-connections"))
            .bearer_auth(&token)
            .json(&json!({"org_id": org, "channel": channel, "name": "x", "secrets": secrets}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{channel} {secrets}");
        let body: Value = r.json().await.unwrap();
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(field), "{message}");
        let value = secrets[field].as_str().unwrap();
        assert!(!message.contains(value), "the value leaked: {message}");
    }
}

#[tokio::test]
async fn ready_names_failing_dependencies_without_driver_text() {
    let db = TestDb::fresh().await;
    let closed = switchboard_testing::free_port();
    let p = TestPod::start_with(
        &db,
        &format!("redis://127.0.0.1:{closed}"),
        &random_prefix(),
        |v| {
            v.insert(
                "DATABASE_URL".into(),
                format!("postgres://nobody:pw@127.0.0.1:{closed}/nothing"),
            );
        },
    )
    .await;
    let r = p.client.get(p.url("/ready")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    for dep in ["postgres", "redis"] {
        let check = &body["checks"][dep];
        assert_eq!(check["ok"], false, "{body}");
        let error = check["error"].as_str().unwrap();
        assert!(
            error == "unavailable" || error.starts_with("timed out"),
            "{dep}: {error}"
        );
    }
    let text = body.to_string();
    for leak in ["refused", "os error", "nobody", "127.0.0.1"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
}

#[tokio::test]
async fn metrics_can_be_served_on_their_own_address() {
    let db = TestDb::fresh().await;
    let p = TestPod::start_with(&db, &redis_url(), &random_prefix(), |v| {
        v.insert("METRICS_ADDR".into(), "127.0.0.1:0".into());
    })
    .await;
    let api = p.client.get(p.url("/metrics")).send().await.unwrap();
    assert_eq!(api.status(), 404, "not on the public port");
    let addr = p.server.metrics_addr().expect("bound");
    let r = p
        .client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("# TYPE"));
}
