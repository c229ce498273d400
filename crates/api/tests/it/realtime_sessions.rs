//! A live Socket.IO connection lasts no longer than its right to exist: it is closed when
//! its token expires, and when the user's membership is removed (on every pod). The other
//! revocations (logout, logout everywhere, Redis away, racing handshakes) are in
//! `revocation.rs`.

use crate::realtime_support::connect_with;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::{TestDb, TestPod, random_prefix, redis_url, seed_member};

/// Waits up to `wait` for `pod` to hold `n` sockets; returns whether it did.
async fn sockets_become(pod: &TestPod, n: usize, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        if pod.server.state().realtime.local_sockets() == n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_socket_is_closed_when_its_token_expires() {
    let db = TestDb::fresh().await;
    let p = TestPod::start_with(&db, &redis_url(), &random_prefix(), |v| {
        v.insert("JWT_TTL_SECS".into(), "3".into());
    })
    .await;
    let (_, email, password) = seed_member(&db, None, Role::Expert).await;
    let token = p.login(&email, &password).await;
    let socket = connect_with(&p, &token).await;
    assert!(sockets_become(&p, 1, Duration::from_secs(2)).await);
    assert!(
        sockets_become(&p, 0, Duration::from_secs(6)).await,
        "the socket outlived its token"
    );
    socket.close().await;
}

#[tokio::test]
async fn removing_a_membership_closes_the_users_sockets_on_every_pod() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let a = TestPod::start(&db, &prefix).await;
    let b = TestPod::start(&db, &prefix).await;
    let (org, admin_email, password) = seed_member(&db, None, Role::Admin).await;
    let admin = a.login(&admin_email, &password).await;
    let (_, expert_email, password) = seed_member(&db, Some(org), Role::Expert).await;
    let expert = b.login(&expert_email, &password).await;
    let (_, stays_email, password) = seed_member(&db, Some(org), Role::Expert).await;
    let stays = b.login(&stays_email, &password).await;
    let leaving = connect_with(&b, &expert).await;
    let staying = connect_with(&b, &stays).await;
    assert!(sockets_become(&b, 2, Duration::from_secs(2)).await);
    // Let pod B's adapter subscriptions settle before A asks it to act.
    let _ = b.server.state().realtime.check_subscriptions().await;

    let me: serde_json::Value = b
        .client
        .get(b.url("/auth/me"))
        .bearer_auth(&expert)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let user_id = me["user"]["id"].as_str().unwrap().to_owned();
    let r = a
        .client
        .delete(a.url(&format!("/orgs/{org}/members/{user_id}")))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(
        sockets_become(&b, 1, Duration::from_secs(5)).await,
        "the removed member's socket on the other pod is still open"
    );
    // The other member's socket is untouched; the removed one's token is revoked.
    let again =
        switchboard_testing::socket::connect(&b, Some(serde_json::json!({"token": expert}))).await;
    assert!(
        again.as_ref().err().is_some_and(|e| e.contains("revoked")),
        "a removed member's token is refused"
    );
    let denied = a
        .client
        .delete(a.url(&format!("/orgs/{org}/members/{user_id}")))
        .bearer_auth(&stays)
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 403, "experts cannot remove members");
    leaving.close().await;
    staying.close().await;
}
