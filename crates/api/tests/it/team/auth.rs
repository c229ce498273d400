use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{JWT_SECRET, TestApp, TestPod, seed_member};

#[tokio::test]
async fn login_and_me() {
    let (pod, db) = TestPod::single().await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = pod.login(&email.to_uppercase(), &password).await;

    let (_, me) = pod.as_user(&token).get("/auth/me").await;
    assert_eq!(me["user"]["email"], email);
    assert_eq!(me["orgs"], json!([{"org_id": org, "role": "admin"}]));
    assert!(me["user"].get("password_hash").is_none());
}

#[tokio::test]
async fn bad_credentials_are_401_and_unknown_users_look_the_same() {
    let (pod, db) = TestPod::single().await;
    let (_, email, _) = seed_member(&db, None, Role::Expert).await;
    for (who, pass) in [
        (email.as_str(), "wrong password"),
        ("nobody@example.test", "x"),
    ] {
        let (status, body) = pod.try_login(who, pass).await;
        assert_eq!(status, 401);
        assert_eq!(
            body,
            json!({"code": "unauthorized", "message": "invalid email or password"})
        );
    }
}

#[tokio::test]
async fn login_is_throttled_per_address_across_pods() {
    let app = TestApp::builder().pods(2).build().await;
    let (_, email, password) = seed_member(&app.db, None, Role::Expert).await;
    // Ten failures spread over two pods use up one shared window.
    for i in 0..10 {
        assert_eq!(app.pod(i % 2).try_login(&email, "wrong").await.0, 401);
    }
    let r = app
        .pod(0)
        .client
        .post(app.pod(0).url("/auth/login"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "rate_limit");
}

#[tokio::test]
async fn tokens_missing_malformed_forged_or_expired_are_rejected() {
    let app = TestApp::builder().build().await;
    let pod = app.pod(0);
    let (_, email, _) = seed_member(&app.db, None, Role::Expert).await;
    let user_id = switchboard_testing::user_id(&app.db, &email).await;
    let now = chrono::Utc::now().timestamp();
    let claims = |exp: i64| json!({"sub": user_id, "iat": now - 100, "exp": exp, "ver": 0, "jti": uuid::Uuid::new_v4()});
    let sign = |secret: &str, claims: Value| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let valid = sign(JWT_SECRET, claims(now + 60));
    let expired = sign(JWT_SECRET, claims(now - 10));
    let forged = sign("some-other-secret", claims(now + 60));
    // Correctly signed, but without what would let it be revoked.
    let unrevocable = sign(
        JWT_SECRET,
        json!({"sub": user_id, "iat": now - 100, "exp": now + 60}),
    );

    let (status, _) = pod.as_user(&valid).get("/auth/me").await;
    assert_eq!(status, 200, "a correctly signed token works");
    for header in [
        None,
        Some("Bearer".to_owned()),
        Some("Basic abc".to_owned()),
        Some(format!("Bearer {expired}")),
        Some(format!("Bearer {forged}")),
        Some(format!("Bearer {unrevocable}")),
        Some("Bearer not.a.jwt".to_owned()),
    ] {
        let mut req = pod.client.get(pod.url("/auth/me"));
        if let Some(h) = &header {
            req = req.header("authorization", h);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401, "{header:?}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], "unauthorized");
    }
}
