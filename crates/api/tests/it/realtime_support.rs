//! Helpers for the F4 tests (the Socket.IO client is `switchboard_testing::socket`).

use serde_json::Value;
use switchboard_domain::Role;
pub use switchboard_testing::socket::{Sock, connect, connect_with};
use switchboard_testing::{TestDb, TestPod, seed_member};
use uuid::Uuid;

/// An org with one expert; returns the org and the expert's token (logged in on `pod`).
pub async fn org_expert(db: &TestDb, pod: &TestPod) -> (Uuid, String) {
    let (org, email, password) = seed_member(db, None, Role::Expert).await;
    (org, pod.login(&email, &password).await)
}

/// Emits an event through `pod`'s emitter, exactly as the flows do after a commit.
pub fn emit(pod: &TestPod, org: Uuid, event: &'static str, payload: Value) {
    let kind = event.parse().expect("a known event name");
    pod.server.state().flows.emitter.emit(org, kind, payload);
}

/// `GET /events` as `token`; returns the status and body.
pub async fn fetch_events(pod: &TestPod, token: &str, query: &str) -> (u16, Value) {
    let r = pod
        .client
        .get(pod.url(&format!("/events?{query}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}
