use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{JWT_SECRET, TestPod, seed_member};

#[tokio::test]
async fn login_and_me() {
    let (pod, db) = TestPod::single().await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = pod.login(&email.to_uppercase(), &password).await;

    let me: Value = pod
        .client
        .get(pod.url("/auth/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
        let r = pod
            .client
            .post(pod.url("/auth/login"))
            .json(&json!({"email": who, "password": pass}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let body: Value = r.json().await.unwrap();
        assert_eq!(
            body,
            json!({"code": "unauthorized", "message": "invalid email or password"})
        );
    }
}

#[tokio::test]
async fn login_is_throttled_per_address_across_pods() {
    let db = switchboard_testing::TestDb::fresh().await;
    let prefix = switchboard_testing::random_prefix();
    let a = TestPod::start(&db, &prefix).await;
    let b = TestPod::start(&db, &prefix).await;
    let (_, email, password) = seed_member(&db, None, Role::Expert).await;
    // Ten failures spread over two pods use up one shared window.
    for i in 0..10 {
        let pod = if i % 2 == 0 { &a } else { &b };
        let r = pod
            .client
            .post(pod.url("/auth/login"))
            .json(&json!({"email": email, "password": "wrong"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    let r = a
        .client
        .post(a.url("/auth/login"))
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
    let (pod, db) = TestPod::single().await;
    let (_, email, _) = seed_member(&db, None, Role::Expert).await;
    let pool = db.pool().await;
    let user_id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_one(&pool)
        .await
        .unwrap();
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

    let ok = pod
        .client
        .get(pod.url("/auth/me"))
        .bearer_auth(&valid)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "a correctly signed token works");
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
