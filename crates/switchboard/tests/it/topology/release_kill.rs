use crate::{process_env, serve_ready, sigkill};
use serde_json::json;
use switchboard_domain::Role;
use switchboard_testing::socket::connect_with;
use switchboard_testing::{TestApp, seed_queue_items};

/// kill -9 of a pod right after its release committed (before it published anything): the
/// other pod's relay delivers the release's events to a socket on it, with the next
/// numbers and no gap.
#[tokio::test]
async fn a_pod_killed_right_after_a_release_commit_still_gets_its_events_delivered() {
    let app = TestApp::builder().no_workers().build().await;
    let (b, db) = (app.pod(0), &app.db);
    let mut vars = process_env(db, &app.prefix);
    vars.insert("WORKER_CONCURRENCY".into(), "0".into());
    // Pod A stops dead after the release commit, and its relay never runs on its own.
    vars.insert("FAULT_INJECT".into(), "release:after_commit:hang".into());
    vars.insert("RELAY_POLL_MS".into(), "3600000".into());
    let (mut child, a) = serve_ready(&vars).await;

    let admin = app.member(None, Role::Admin).await;
    let token = admin.token;
    let connection = b
        .as_user(&token)
        .create_connection(admin.org, "slack")
        .await;
    let items = seed_queue_items(db, admin.org, connection, 2).await;
    let mut sock = connect_with(b, &token).await;

    // A first release through pod B: numbers 1 to 3.
    let (status, _) = b
        .as_user(&token)
        .post_empty(&format!("/expert-queue/{}/release", items[0]))
        .await;
    assert_eq!(status, 200);
    let first = sock.take(3).await;
    assert_eq!(first.len(), 3, "{first:?}");

    // The second through pod A, which dies right after its commit.
    let release = {
        let (http, token, url) = (
            a.client.clone(),
            token.clone(),
            a.url(&format!("/expert-queue/{}/release", items[1])),
        );
        tokio::spawn(async move { http.post(url).bearer_auth(token).send().await })
    };
    assert!(
        db.wait_for_at_least("SELECT count(*) FROM outbox", 2).await >= 2,
        "the release never committed"
    );
    sigkill(&mut child);
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
