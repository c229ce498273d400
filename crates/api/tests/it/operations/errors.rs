use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{TestApp, TestPod};

#[tokio::test]
async fn oversized_body_is_413_and_writes_nothing() {
    let app = TestApp::builder().build().await;
    let admin = app.member(None, Role::Admin).await;
    // The test pods accept 64 KiB.
    let big = "x".repeat(70 * 1024);
    let (status, body) = app
        .pod(0)
        .as_user(&admin.token)
        .post(
            "/channel-connections",
            json!({"org_id": admin.org, "channel": "slack", "name": big,
                "secrets": {"signing_secret": "s", "bot_token": "b"}}),
        )
        .await;
    assert_eq!(status, 413);
    assert_eq!(body["code"], "payload_too_large");
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM channel_connections")
            .await,
        0
    );
}

#[tokio::test]
async fn malformed_json_is_400_with_a_stable_code() {
    let (pod, _db) = TestPod::single().await;
    for (body, content_type) in [
        ("{not json", "application/json"),
        ("{\"email\": 5, \"password\": \"x\"}", "application/json"),
        ("email=a&password=b", "application/x-www-form-urlencoded"),
    ] {
        let r = pod
            .client
            .post(pod.url("/auth/login"))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["code"], "invalid_json", "{body}");
        assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

#[tokio::test]
async fn unknown_routes_bad_ids_and_methods_answer_json() {
    let app = TestApp::builder().build().await;
    let pod = app.pod(0);
    let token = app.member(None, Role::Admin).await.token;
    let cases = [
        (pod.client.get(pod.url("/nope")), 404, "not_found"),
        (
            pod.client
                .get(pod.url("/channel-connections/not-a-uuid"))
                .bearer_auth(&token),
            400,
            "invalid_path",
        ),
        (
            pod.client.put(pod.url("/auth/login")),
            405,
            "method_not_allowed",
        ),
    ];
    for (req, status, code) in cases {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), status);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], code);
    }
}

#[tokio::test]
async fn responses_carry_a_request_id_and_metrics_count_them() {
    let (pod, _db) = TestPod::single().await;
    let r = pod.get("/health").await;
    assert!(r.headers().get("x-request-id").is_some());
    let r = pod
        .client
        .get(pod.url("/health"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    let metrics = pod.metrics().await;
    assert!(metrics.contains("http_requests_total"), "{metrics}");
    assert!(metrics.contains("route=\"/health\""), "{metrics}");
    assert!(
        metrics.contains("http_request_duration_seconds_bucket"),
        "{metrics}"
    );
}
