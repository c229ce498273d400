use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::{TestDb, TestPod, random_prefix, seed_member};

#[tokio::test]
async fn any_pod_serves_any_request() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let a = TestPod::start(&db, &prefix).await;
    let b = TestPod::start(&db, &prefix).await;
    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    // Log in on A, create on B, read on A, delete on B.
    let token = a.login(&email, &password).await;
    let created: Value = b
        .client
        .post(b.url("/channel-connections"))
        .bearer_auth(&token)
        .json(&json!({"org_id": org, "channel": "telegram", "name": "bot",
            "secrets": {"bot_token": "123:abc", "secret_token": "s3-0123456789abcdef"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!("/channel-connections/{}", created["id"].as_str().unwrap());
    assert_eq!(
        a.client
            .get(a.url(&path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        b.client
            .delete(b.url(&path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        a.client
            .get(a.url(&path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // A concurrent double create across pods makes exactly one connection.
    let body = json!({"org_id": org, "channel": "slack", "name": "race",
        "secrets": {"signing_secret": "s", "bot_token": "b"}});
    let (ra, rb) = tokio::join!(
        a.client
            .post(a.url("/channel-connections"))
            .bearer_auth(&token)
            .json(&body)
            .send(),
        b.client
            .post(b.url("/channel-connections"))
            .bearer_auth(&token)
            .json(&body)
            .send(),
    );
    let mut statuses = [ra.unwrap().status().as_u16(), rb.unwrap().status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409]);
}
