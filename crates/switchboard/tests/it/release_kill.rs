use crate::serve_ready;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use switchboard_domain::Role;
use switchboard_testing::signing::secrets;
use switchboard_testing::socket::connect_with;
use switchboard_testing::{
    TestDb, TestPod, free_port, pod_env, random_prefix, redis_url, seed_member, seed_queue_items,
};

/// kill -9 of a pod right after its release committed (before it published anything): the
/// other pod's relay delivers the release's events to a socket on it, with the next
/// numbers and no gap.
#[tokio::test]
async fn a_pod_killed_right_after_a_release_commit_still_gets_its_events_delivered() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let b = TestPod::start_with(&db, &redis_url(), &prefix, |v| {
        v.insert("WORKER_CONCURRENCY".into(), "0".into());
    })
    .await;
    let port = free_port();
    let mut vars = pod_env(&db, &redis_url(), &prefix);
    vars.insert("PORT".into(), port.to_string());
    vars.insert("WORKER_CONCURRENCY".into(), "0".into());
    // Pod A stops dead after the release commit, and its relay never runs on its own.
    vars.insert("FAULT_INJECT".into(), "release:after_commit:hang".into());
    vars.insert("RELAY_POLL_MS".into(), "3600000".into());
    let (mut child, a) = serve_ready(&vars).await;
    let http = switchboard_testing::http();

    let (org, email, password) = seed_member(&db, None, Role::Admin).await;
    let token = b.login(&email, &password).await;
    let connection: Value = b
        .client
        .post(b.url("/channel-connections"))
        .bearer_auth(&token)
        .json(&json!({"org_id": org, "channel": "slack", "name": "s", "secrets": secrets("slack")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let connection = connection["id"].as_str().unwrap().parse().unwrap();
    let items = seed_queue_items(&db, org, connection, 2).await;
    let mut sock = connect_with(&b, &token).await;

    // A first release through pod B: numbers 1 to 3.
    let r = b
        .client
        .post(b.url(&format!("/expert-queue/{}/release", items[0])))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let first = sock.take(3).await;
    assert_eq!(first.len(), 3, "{first:?}");

    // The second through pod A, which dies right after its commit.
    let release = {
        let (http, token, url) = (
            http.clone(),
            token.clone(),
            format!("{a}/expert-queue/{}/release", items[1]),
        );
        tokio::spawn(async move { http.post(url).bearer_auth(token).send().await })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.count("SELECT count(*) FROM outbox").await < 2 {
        assert!(Instant::now() < deadline, "the release never committed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        release.await.unwrap().is_err(),
        "pod A answered although it was killed"
    );

    let events = sock.take(3).await;
    let got: Vec<(&str, i64)> = events
        .iter()
        .map(|(n, d)| (n.as_str(), d["seq"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("queue_item_updated", 4),
            ("message_created", 5),
            ("agent_message_sent", 6)
        ]
    );
    assert_eq!(events[2].1["queue_item_id"], json!(items[1]));
    sock.close().await;
}
