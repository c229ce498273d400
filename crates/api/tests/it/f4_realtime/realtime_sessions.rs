//! A live Socket.IO connection lasts no longer than its right to exist: it is closed when
//! its token expires, and when the user's membership is removed (on every pod). The other
//! revocations (logout, logout everywhere, Redis away, racing handshakes) are in
//! `team/revocation.rs`.

use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::TestApp;
use switchboard_testing::socket::{connect, connect_with};

#[tokio::test]
async fn a_socket_is_closed_when_its_token_expires() {
    let app = TestApp::builder().env("JWT_TTL_SECS", "3").build().await;
    let p = app.pod(0);
    let expert = app.member(None, Role::Expert).await;
    let socket = connect_with(p, &expert.token).await;
    assert!(p.sockets_become(1, Duration::from_secs(2)).await);
    assert!(
        p.sockets_become(0, Duration::from_secs(6)).await,
        "the socket outlived its token"
    );
    socket.close().await;
}

#[tokio::test]
async fn removing_a_membership_closes_the_users_sockets_on_every_pod() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let admin = app.member(None, Role::Admin).await;
    let leaver = app.member(Some(admin.org), Role::Expert).await;
    let expert = b.login(&leaver.email, &leaver.password).await;
    let stayer = app.member(Some(admin.org), Role::Expert).await;
    let stays = b.login(&stayer.email, &stayer.password).await;
    let leaving = connect_with(b, &expert).await;
    let staying = connect_with(b, &stays).await;
    assert!(b.sockets_become(2, Duration::from_secs(2)).await);
    // Let pod B's adapter subscriptions settle before A asks it to act.
    let _ = b.server.state().realtime.check_subscriptions().await;

    let (_, me) = b.as_user(&expert).get("/auth/me").await;
    let user_id = me["user"]["id"].as_str().unwrap().to_owned();
    let member = format!("/orgs/{}/members/{user_id}", admin.org);
    assert_eq!(a.as_user(&admin.token).delete(&member).await, 204);
    assert!(
        b.sockets_become(1, Duration::from_secs(5)).await,
        "the removed member's socket on the other pod is still open"
    );
    // The other member's socket is untouched; the removed one's token is revoked.
    let again = connect(b, Some(serde_json::json!({"token": expert}))).await;
    assert!(
        again
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("revoked")),
        "a removed member's token is refused"
    );
    assert_eq!(
        a.as_user(&stays).delete(&member).await,
        403,
        "experts cannot remove members"
    );
    leaving.close().await;
    staying.close().await;
}
