//! Revocation that holds (SPEC §11): a logout ends that token, a logout everywhere or a
//! membership removal ends every session of the user, on REST at the next request and on
//! sockets within 5 s on every pod, even when Redis is away at that moment or a handshake
//! races the removal.

use crate::realtime_support::connect_with;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::socket::{Sock, connect};
use switchboard_testing::{RedisServer, TestDb, TestPod, random_prefix, seed_member};
use tokio::time::Instant;
use uuid::Uuid;

/// SPEC §11's bound on a revoked session's sockets.
const WITHIN: Duration = Duration::from_secs(5);

/// Polls until `pod` holds `n` sockets or `wait` passes; returns whether it did.
async fn sockets_become(pod: &TestPod, n: usize, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        if pod.server.state().realtime.local_sockets() == n {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// `GET /auth/me` as `token` on `pod`: the status and the error code, if any.
async fn me(pod: &TestPod, token: &str) -> (u16, Value) {
    let r = pod
        .client
        .get(pod.url("/auth/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    (status, body["code"].clone())
}

/// `POST {path}` as `token` on `pod`; the status.
async fn post(pod: &TestPod, path: &str, token: &str) -> u16 {
    pod.client
        .post(pod.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The user id behind `email`.
async fn user_id(db: &TestDb, email: &str) -> Uuid {
    let pool = db.pool().await;
    let id = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(email)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}

/// A refused handshake's message, or a panic if the socket was admitted.
async fn refused(pod: &TestPod, token: &str) -> String {
    match connect(pod, Some(json!({ "token": token }))).await {
        Ok(sock) => {
            sock.close().await;
            panic!("a revoked token's socket was admitted");
        }
        Err(message) => message,
    }
}

async fn close_all(socks: Vec<Sock>) {
    for s in socks {
        s.close().await;
    }
}

#[tokio::test]
async fn logout_revokes_only_this_token_on_rest_and_sockets() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let a = TestPod::start(&db, &prefix).await;
    let b = TestPod::start(&db, &prefix).await;
    let (_, email, password) = seed_member(&db, None, Role::Expert).await;
    let leaving = a.login(&email, &password).await;
    let staying = b.login(&email, &password).await;
    let socks = vec![
        connect_with(&a, &leaving).await,
        connect_with(&b, &leaving).await,
        connect_with(&b, &staying).await,
    ];
    assert!(sockets_become(&a, 1, WITHIN).await && sockets_become(&b, 2, WITHIN).await);

    // A logout long expired: the next logout deletes its row.
    let pool = db.pool().await;
    sqlx::query(
        "INSERT INTO revoked_tokens (user_id, jti, expires_at)
         VALUES ($1, gen_random_uuid(), now() - interval '1 hour')",
    )
    .bind(user_id(&db, &email).await)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let started = Instant::now();
    assert_eq!(post(&a, "/auth/logout", &leaving).await, 204);
    // REST refuses it on both pods at once, with a code a console can act on.
    for pod in [&a, &b] {
        assert_eq!(me(pod, &leaving).await, (401, json!("token_revoked")));
        assert_eq!(me(pod, &staying).await.0, 200, "the other session goes on");
    }
    // Its sockets close on both pods (no broadcast is sent for one token: each pod's own
    // session check finds it).
    assert!(
        sockets_become(&a, 0, WITHIN).await && sockets_become(&b, 1, WITHIN).await,
        "the logged-out token's sockets outlived it"
    );
    assert!(started.elapsed() <= WITHIN, "{:?}", started.elapsed());
    // The other session's socket survives a check, and the logged-out token cannot connect.
    let check = b.server.state().realtime.check_sessions().await.unwrap();
    assert_eq!((check.sockets, check.closed), (1, 0));
    assert!(refused(&b, &leaving).await.contains("revoked"));
    // Logging out again is refused like any other use of it; the denylist holds it once,
    // and no longer the expired one.
    assert_eq!(post(&b, "/auth/logout", &leaving).await, 401);
    assert_eq!(
        db.count("SELECT count(*) FROM revoked_tokens WHERE expires_at > now()")
            .await,
        1,
        "one row per token"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM revoked_tokens").await,
        1,
        "the expired row was cleaned up"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM audit_log WHERE action = 'auth.logout'")
            .await,
        1
    );
    close_all(socks).await;
}

#[tokio::test]
async fn logout_all_ends_every_session_of_the_user_on_both_pods() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let a = TestPod::start(&db, &prefix).await;
    let b = TestPod::start(&db, &prefix).await;
    let (org, email, password) = seed_member(&db, None, Role::Expert).await;
    let (_, other_email, other_password) = seed_member(&db, Some(org), Role::Expert).await;
    let other = a.login(&other_email, &other_password).await;
    let t1 = a.login(&email, &password).await;
    let t2 = b.login(&email, &password).await;
    let socks = vec![
        connect_with(&a, &t1).await,
        connect_with(&b, &t2).await,
        connect_with(&b, &other).await,
    ];
    assert!(sockets_become(&a, 1, WITHIN).await && sockets_become(&b, 2, WITHIN).await);

    assert_eq!(post(&b, "/auth/logout-all", &t1).await, 204);
    for pod in [&a, &b] {
        for token in [&t1, &t2] {
            assert_eq!(me(pod, token).await, (401, json!("token_revoked")));
        }
        assert_eq!(me(pod, &other).await.0, 200, "another user is untouched");
    }
    assert!(
        sockets_become(&a, 0, WITHIN).await && sockets_become(&b, 1, WITHIN).await,
        "a session outlived logout-all"
    );
    assert!(refused(&a, &t2).await.contains("revoked"));

    // A new login is a new session.
    let fresh = a.login(&email, &password).await;
    assert_eq!(me(&b, &fresh).await.0, 200);
    let again = connect_with(&b, &fresh).await;
    assert!(sockets_become(&b, 2, WITHIN).await);
    close_all(socks).await;
    again.close().await;
}

#[tokio::test]
async fn removal_while_redis_is_down_still_closes_the_members_sockets_on_both_pods() {
    let db = TestDb::fresh().await;
    let mut redis = RedisServer::start().await;
    let prefix = random_prefix();
    let a = TestPod::start_with(&db, &redis.url(), &prefix, |_| {}).await;
    let b = TestPod::start_with(&db, &redis.url(), &prefix, |_| {}).await;
    let (org, admin_email, password) = seed_member(&db, None, Role::Admin).await;
    let admin = a.login(&admin_email, &password).await;
    let (_, email, password) = seed_member(&db, Some(org), Role::Expert).await;
    let expert = b.login(&email, &password).await;
    let (_, stays_email, stays_password) = seed_member(&db, Some(org), Role::Expert).await;
    let stays = b.login(&stays_email, &stays_password).await;
    let socks = vec![
        connect_with(&a, &expert).await,
        connect_with(&b, &expert).await,
        connect_with(&b, &stays).await,
    ];
    assert!(sockets_become(&a, 1, WITHIN).await && sockets_become(&b, 2, WITHIN).await);
    let expert_id = user_id(&db, &email).await;

    // Redis goes away: the removal's broadcast cannot reach pod B.
    redis.stop();
    let started = Instant::now();
    let r = a
        .client
        .delete(a.url(&format!("/orgs/{org}/members/{expert_id}")))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(
        sockets_become(&a, 0, WITHIN).await && sockets_become(&b, 1, WITHIN).await,
        "the removed member's sockets stayed open without Redis"
    );
    assert!(
        started.elapsed() <= WITHIN,
        "closed only after {:?}",
        started.elapsed()
    );
    assert_eq!(me(&b, &expert).await, (401, json!("token_revoked")));
    assert_eq!(me(&b, &stays).await.0, 200);
    // The removal, the version bump and the audit row committed together.
    let removed = db
        .count(&format!(
            "SELECT count(*) FROM audit_log WHERE action = 'org_member.removed' AND target_id = '{expert_id}'
             AND EXISTS (SELECT 1 FROM users WHERE id = '{expert_id}' AND token_version = 1)
             AND NOT EXISTS (SELECT 1 FROM org_members WHERE user_id = '{expert_id}')"
        ))
        .await;
    assert_eq!(removed, 1);
    close_all(socks).await;
}

#[tokio::test]
async fn a_handshake_racing_a_removal_does_not_stay_in_the_room() {
    let db = TestDb::fresh().await;
    let prefix = random_prefix();
    let a = TestPod::start(&db, &prefix).await;
    let b = TestPod::start(&db, &prefix).await;
    let (org, admin_email, password) = seed_member(&db, None, Role::Admin).await;
    let admin = a.login(&admin_email, &password).await;
    let (_, email, password) = seed_member(&db, Some(org), Role::Expert).await;
    let expert = b.login(&email, &password).await;
    let expert_id = user_id(&db, &email).await;

    // Held after joining its rooms: a handshake that nothing races is admitted.
    let mut hold = b.server.state().realtime.hold_next_handshake();
    let connecting = tokio::spawn({
        let (base, token) = (b.base.clone(), expert.clone());
        async move {
            switchboard_testing::socket::connect_url(&base, Some(json!({"token": token}))).await
        }
    });
    assert!(
        hold.reached(WITHIN).await,
        "the handshake never reached its hold point"
    );
    hold.release();
    let admitted = connecting.await.unwrap().expect("admitted");
    admitted.close().await;
    assert!(sockets_become(&b, 0, WITHIN).await);

    // Now the removal commits (and broadcasts, finding no socket yet) while the handshake
    // has read the membership and joined the org's room: the read after the join refuses it.
    let mut hold = b.server.state().realtime.hold_next_handshake();
    let connecting = tokio::spawn({
        let (base, token) = (b.base.clone(), expert.clone());
        async move {
            switchboard_testing::socket::connect_url(&base, Some(json!({"token": token}))).await
        }
    });
    assert!(hold.reached(WITHIN).await);
    let r = a
        .client
        .delete(a.url(&format!("/orgs/{org}/members/{expert_id}")))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    hold.release();
    let outcome = connecting.await.unwrap();
    let message = outcome.err().expect("the racing handshake was admitted");
    assert!(message.contains("revoked"), "{message}");
    assert_eq!(b.server.state().realtime.local_sockets(), 0);
}

#[tokio::test]
async fn a_handshake_racing_a_membership_change_without_a_revocation_is_refused_too() {
    // A membership deleted outside the API (an operator's SQL, an org deleted) bumps no
    // version; the read after the join still sees it.
    let db = TestDb::fresh().await;
    let pod = TestPod::start(&db, &random_prefix()).await;
    let (org, email, password) = seed_member(&db, None, Role::Expert).await;
    let (other_org, _, _) = seed_member(&db, None, Role::Admin).await;
    let token = pod.login(&email, &password).await;
    let expert_id = user_id(&db, &email).await;
    let pool = db.pool().await;
    switchboard_store::users::add_member(&pool, other_org, expert_id, Role::Expert)
        .await
        .unwrap();

    let mut hold = pod.server.state().realtime.hold_next_handshake();
    let connecting = tokio::spawn({
        let (base, token) = (pod.base.clone(), token.clone());
        async move {
            switchboard_testing::socket::connect_url(&base, Some(json!({"token": token}))).await
        }
    });
    assert!(hold.reached(WITHIN).await);
    sqlx::query("DELETE FROM org_members WHERE org_id = $1 AND user_id = $2")
        .bind(org)
        .bind(expert_id)
        .execute(&pool)
        .await
        .unwrap();
    hold.release();
    let message = connecting.await.unwrap().err().expect("refused");
    assert!(message.contains("memberships changed"), "{message}");
    assert_eq!(pod.server.state().realtime.local_sockets(), 0);

    // Connected, the same change is found by the pod's session check (no Redis involved).
    let sock = connect_with(&pod, &token).await;
    assert!(sockets_become(&pod, 1, WITHIN).await);
    sqlx::query("DELETE FROM org_members WHERE org_id = $1 AND user_id = $2")
        .bind(other_org)
        .bind(expert_id)
        .execute(&pool)
        .await
        .unwrap();
    let check = pod.server.state().realtime.check_sessions().await.unwrap();
    assert_eq!((check.sockets, check.closed), (1, 1));
    assert!(sockets_become(&pod, 0, WITHIN).await);
    sock.close().await;
    pool.close().await;
}

#[tokio::test]
async fn one_check_is_one_query_over_the_users_of_all_the_pods_sockets() {
    let db = TestDb::fresh().await;
    let pod = TestPod::start(&db, &random_prefix()).await;
    let (org, email, password) = seed_member(&db, None, Role::Expert).await;
    let (_, other_email, other_password) = seed_member(&db, Some(org), Role::Admin).await;
    let mine = pod.login(&email, &password).await;
    let theirs = pod.login(&other_email, &other_password).await;
    let mut socks = Vec::new();
    for i in 0..20 {
        socks.push(connect_with(&pod, if i % 2 == 0 { &mine } else { &theirs }).await);
    }
    assert!(sockets_become(&pod, 20, WITHIN).await);
    let check = pod.server.state().realtime.check_sessions().await.unwrap();
    assert_eq!((check.sockets, check.users, check.closed), (20, 2, 0));

    assert_eq!(post(&pod, "/auth/logout-all", &mine).await, 204);
    assert!(sockets_become(&pod, 10, WITHIN).await);
    close_all(socks).await;
}
