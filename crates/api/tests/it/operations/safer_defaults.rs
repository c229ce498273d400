//! Safer defaults and less leakage: login throttle keys, secrets refused at create, `/ready`
//! without driver text, `/metrics` on its own address.

use serde_json::json;
use sha2::{Digest, Sha256};
use switchboard_domain::Role;
use switchboard_testing::{TestApp, TestDb, TestPod, random_prefix, redis_keys};

#[tokio::test]
async fn login_refuses_overlong_emails_first_and_throttles_on_a_hash() {
    let app = TestApp::builder().build().await;
    let (p, prefix) = (app.pod(0), &app.prefix);
    let long = format!("{}@example.test", "a".repeat(250));
    let (status, body) = p.try_login(&long, "whatever").await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], "email_too_long");

    let (status, _) = p
        .try_login("  Someone@Example.TEST ", "wrong password")
        .await;
    assert_eq!(status, 401);
    let keys = redis_keys(&format!("{prefix}:limit:login:*")).await;
    let hash = hex::encode(Sha256::digest(b"someone@example.test"));
    assert_eq!(keys, [format!("{prefix}:limit:login:{hash}")]);
}

#[tokio::test]
async fn secrets_that_cannot_work_are_refused_at_create_naming_the_field() {
    let app = TestApp::builder().build().await;
    let admin = app.member(None, Role::Admin).await;
    let user = app.pod(0).as_user(&admin.token);
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
        let body =
            json!({"org_id": admin.org, "channel": channel, "name": "x", "secrets": secrets});
        let (status, body) = user.post("/channel-connections", body).await;
        assert_eq!(status, 422, "{channel} {secrets}");
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
    let (status, body) = p.ready().await;
    assert_eq!(status, 503);
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
    let app = TestApp::builder()
        .env("METRICS_ADDR", "127.0.0.1:0")
        .build()
        .await;
    let p = app.pod(0);
    assert_eq!(p.status("/metrics").await, 404, "not on the public port");
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
