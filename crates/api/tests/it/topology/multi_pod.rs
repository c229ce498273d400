use serde_json::json;
use switchboard_domain::Role;
use switchboard_testing::TestApp;

#[tokio::test]
async fn any_pod_serves_any_request() {
    let app = TestApp::builder().pods(2).build().await;
    // Log in on A, create on B, read on A, delete on B.
    let admin = app.member(None, Role::Admin).await;
    let (a, b) = (
        app.pod(0).as_user(&admin.token),
        app.pod(1).as_user(&admin.token),
    );
    let secrets = json!({"bot_token": "123:abc", "secret_token": "s3-0123456789abcdef"});
    let id = b
        .create_connection_with(admin.org, "telegram", "bot", secrets)
        .await;
    let path = format!("/channel-connections/{id}");
    assert_eq!(a.get(&path).await.0, 200);
    assert_eq!(b.delete(&path).await, 204);
    assert_eq!(a.get(&path).await.0, 404);
    // A concurrent double create across pods makes exactly one connection.
    let body = json!({"org_id": admin.org, "channel": "slack", "name": "race",
        "secrets": {"signing_secret": "s", "bot_token": "b"}});
    let (ra, rb) = tokio::join!(
        a.post("/channel-connections", body.clone()),
        b.post("/channel-connections", body.clone()),
    );
    let mut statuses = [ra.0, rb.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409]);
}
