//! Presence: who has a conversation open, across pods through Redis and the Socket.IO
//! adapter, cleared when the viewer leaves or disconnects, never shown to another org, and
//! strict about what a client sends.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::socket::{Sock, connect_with};
use switchboard_testing::{TestApp, seed_item};
use uuid::Uuid;

const WITHIN: Duration = Duration::from_secs(5);

async fn conversation_of(app: &TestApp, item: Uuid) -> Uuid {
    let pool = app.db.pool().await;
    let id = sqlx::query_scalar("SELECT conversation_id FROM expert_queue WHERE id = $1")
        .bind(item)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}

/// The next `presence` for `conversation` whose viewers `wanted` accepts.
async fn presence_where(
    sock: &mut Sock,
    conversation: Uuid,
    wanted: impl Fn(&[Value]) -> bool,
) -> Option<Value> {
    sock.next_matching(WITHIN, |name, data| {
        name == "presence"
            && data["conversation_id"] == json!(conversation)
            && wanted(data["viewers"].as_array().map_or(&[][..], Vec::as_slice))
    })
    .await
    .map(|(_, data)| data)
}

fn ids(viewers: &Value) -> Vec<Value> {
    viewers
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["user_id"].clone())
        .collect()
}

#[tokio::test]
async fn presence_crosses_pods_clears_on_disconnect_and_stays_in_the_org() {
    let app = TestApp::builder().pods(2).no_workers().build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org().await;
    let viewer = app.member(Some(org.id), Role::Expert).await;
    let watcher = app.member(Some(org.id), Role::Expert).await;
    let other_org = app.org().await;
    let outsider = app.member(Some(other_org.id), Role::Expert).await;
    let conversation = conversation_of(
        &app,
        seed_item(
            &app.db,
            org.id,
            "slack",
            org.conns["slack"],
            json!({"channel": "C1"}),
        )
        .await,
    )
    .await;
    let outsider_conversation = conversation_of(
        &app,
        seed_item(
            &app.db,
            other_org.id,
            "slack",
            other_org.conns["slack"],
            json!({"channel": "C1"}),
        )
        .await,
    )
    .await;

    let viewing_sock = connect_with(a, &viewer.token).await;
    let mut watching = connect_with(b, &watcher.token).await;
    let mut outside = connect_with(b, &outsider.token).await;

    // The viewer on pod A opens the conversation; the watcher on pod B is told, by name.
    let ack = viewing_sock
        .ask("viewing", json!({ "conversation_id": conversation }))
        .await
        .expect("acknowledged");
    assert_eq!(ack["ok"], true, "{ack}");
    assert_eq!(ids(&ack["viewers"]), vec![json!(viewer.id)]);
    let seen = presence_where(&mut watching, conversation, |v| v.len() == 1)
        .await
        .expect("presence on the other pod");
    assert_eq!(ids(&seen["viewers"]), vec![json!(viewer.id)]);
    assert!(
        !seen["viewers"][0]["name"].as_str().unwrap().is_empty(),
        "{seen}"
    );
    assert_eq!(seen["ttl_secs"], 10);

    // The viewer's pod re-announces on its heartbeat while the conversation stays open.
    let again = presence_where(&mut watching, conversation, |v| v.len() == 1).await;
    assert!(again.is_some(), "heartbeat re-announcement");

    // Bad payloads are refused and change nothing: not an object, not a uuid, an unknown
    // field, a conversation that does not exist, another org's conversation.
    // The prober is a user of its own, so an entry a bad payload added would show as one.
    let prober_member = app.member(Some(org.id), Role::Expert).await;
    let prober = connect_with(b, &prober_member.token).await;
    for bad in [
        json!("nonsense"),
        json!({ "conversation_id": "not-a-uuid" }),
        json!({ "conversation_id": conversation, "extra": 1 }),
        json!({ "conversation_id": Uuid::new_v4() }),
        json!({ "conversation_id": outsider_conversation }),
    ] {
        let ack = prober
            .ask("viewing", bad.clone())
            .await
            .expect("acknowledged");
        assert_eq!(ack["ok"], false, "{bad} → {ack}");
        assert!(ack["error"].is_string(), "{ack}");
    }
    // Nothing was added: the viewer is still alone on the conversation (the other org's
    // conversation is checked below).
    let ack = viewing_sock
        .ask("viewing", json!({ "conversation_id": conversation }))
        .await
        .unwrap();
    assert_eq!(ids(&ack["viewers"]), vec![json!(viewer.id)], "{ack}");
    // A valid view from the prober shows the viewer and the prober.
    let ack = prober
        .ask("viewing", json!({ "conversation_id": conversation }))
        .await
        .unwrap();
    let mut got = ids(&ack["viewers"]);
    got.sort_by_key(Value::to_string);
    let mut want = vec![json!(viewer.id), json!(prober_member.id)];
    want.sort_by_key(Value::to_string);
    assert_eq!(got, want, "{ack}");
    // Leaving takes the prober out at once (asking again reads the viewers, announcing
    // nothing).
    assert_eq!(
        prober.ask("stopped_viewing", json!({})).await.unwrap()["ok"],
        true
    );
    let ack = viewing_sock
        .ask("viewing", json!({ "conversation_id": conversation }))
        .await
        .unwrap();
    assert_eq!(ids(&ack["viewers"]), vec![json!(viewer.id)], "{ack}");
    prober.close().await;

    // The viewer disconnects: the watcher sees the conversation empty within seconds.
    viewing_sock.close().await;
    presence_where(&mut watching, conversation, <[Value]>::is_empty)
        .await
        .expect("presence cleared after the viewer disconnected");

    // The outsider views their own conversation and leaves it: they see those two events
    // and, before them, nothing about the first org's conversation.
    let ack = outside
        .ask(
            "viewing",
            json!({ "conversation_id": outsider_conversation }),
        )
        .await
        .unwrap();
    assert_eq!(ack["ok"], true);
    assert_eq!(
        ids(&ack["viewers"]),
        vec![json!(outsider.id)],
        "the prober's refused view of this conversation added nothing: {ack}"
    );
    assert_eq!(
        outside.ask("stopped_viewing", json!({})).await.unwrap()["ok"],
        true
    );
    let mut own = 0;
    while let Some((name, data)) = outside.next(WITHIN).await {
        assert_eq!(name, "presence", "{data}");
        assert_eq!(
            data["conversation_id"],
            json!(outsider_conversation),
            "another org's presence leaked: {data}"
        );
        own += 1;
        if own == 2 && data["viewers"].as_array().unwrap().is_empty() {
            break;
        }
    }
    assert_eq!(own, 2, "the outsider saw their own presence come and go");
    watching.close().await;
    outside.close().await;
}

#[tokio::test]
async fn presence_of_a_dead_pods_socket_expires_by_its_ttl() {
    let app = TestApp::builder().pods(2).no_workers().build().await;
    let org = app.org().await;
    let viewer = app.member(Some(org.id), Role::Expert).await;
    let watcher = app.member(Some(org.id), Role::Expert).await;
    let conversation = conversation_of(
        &app,
        seed_item(
            &app.db,
            org.id,
            "slack",
            org.conns["slack"],
            json!({"channel": "C1"}),
        )
        .await,
    )
    .await;
    // The entry a pod wrote just before it was killed: nobody refreshes or removes it, and
    // its expiry (the score) is 1.5 s away.
    let ghost = Uuid::new_v4();
    let client = redis::Client::open(app.redis_url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let expires = chrono::Utc::now().timestamp_millis() + 1_500;
    let () = redis::cmd("ZADD")
        .arg(format!("{}:presence:{conversation}", app.prefix))
        .arg(expires)
        .arg(json!({"sid": "dead", "user_id": ghost, "name": "Ghost"}).to_string())
        .query_async(&mut conn)
        .await
        .unwrap();

    let mut watching = connect_with(app.pod(1), &watcher.token).await;
    let viewing = connect_with(app.pod(0), &viewer.token).await;
    let ack = viewing
        .ask("viewing", json!({ "conversation_id": conversation }))
        .await
        .unwrap();
    assert!(ids(&ack["viewers"]).contains(&json!(ghost)), "{ack}");
    // The live pod's heartbeat announces the conversation without the dead pod's viewer.
    let (_, after) = watching
        .next_matching(Duration::from_secs(10), |name, data| {
            name == "presence"
                && data["conversation_id"] == json!(conversation)
                && data["viewers"].as_array().is_some_and(|v| v.len() == 1)
        })
        .await
        .expect("the ghost dropped out with its TTL");
    assert_eq!(ids(&after["viewers"]), vec![json!(viewer.id)]);
    viewing.close().await;
    watching.close().await;
}
