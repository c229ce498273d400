//! Revocation that holds (SPEC §11): a logout ends that token, a logout everywhere or a
//! membership removal ends every session of the user, on REST at the next request and on
//! sockets within 5 s on every pod, even when Redis is away at that moment or a handshake
//! races the removal.

use serde_json::json;
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::socket::{Sock, connect, connect_url, connect_with};
use switchboard_testing::{RedisServer, TestApp, TestPod};
use tokio::time::Instant;

/// SPEC §11's bound on a revoked session's sockets.
const WITHIN: Duration = Duration::from_secs(5);

/// A refused handshake's message, or a panic if the socket was admitted.
async fn refused(pod: &TestPod, token: &str) -> String {
    match connect(pod, Some(json!({ "token": token }))).await {
        Ok(sock) => {
            sock.close().await;
            panic!("a revoked token's socket was admitted");
        }
        Err(e) => e.to_string(),
    }
}

async fn close_all(socks: Vec<Sock>) {
    for s in socks {
        s.close().await;
    }
}

#[tokio::test]
async fn logout_revokes_only_this_token_on_rest_and_sockets() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let user = app.member(None, Role::Expert).await;
    let leaving = a.login(&user.email, &user.password).await;
    let staying = b.login(&user.email, &user.password).await;
    let socks = vec![
        connect_with(a, &leaving).await,
        connect_with(b, &leaving).await,
        connect_with(b, &staying).await,
    ];
    assert!(a.sockets_become(1, WITHIN).await && b.sockets_become(2, WITHIN).await);

    // A logout long expired: the next logout deletes its row.
    let pool = db.pool().await;
    sqlx::query(
        "INSERT INTO revoked_tokens (user_id, jti, expires_at)
         VALUES ($1, gen_random_uuid(), now() - interval '1 hour')",
    )
    .bind(user.id)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let started = Instant::now();
    assert_eq!(a.as_user(&leaving).post_empty("/auth/logout").await.0, 204);
    // REST refuses it on both pods at once, with a code a console can act on.
    for pod in [a, b] {
        assert_eq!(
            pod.as_user(&leaving).me().await,
            (401, json!("token_revoked"))
        );
        assert_eq!(
            pod.as_user(&staying).me().await.0,
            200,
            "the other session goes on"
        );
    }
    // Its sockets close on both pods (no broadcast is sent for one token: each pod's own
    // session check finds it).
    assert!(
        a.sockets_become(0, WITHIN).await && b.sockets_become(1, WITHIN).await,
        "the logged-out token's sockets outlived it"
    );
    assert!(started.elapsed() <= WITHIN, "{:?}", started.elapsed());
    // The other session's socket survives a check, and the logged-out token cannot connect.
    let check = b.server.state().realtime.check_sessions().await.unwrap();
    assert_eq!((check.sockets, check.closed), (1, 0));
    assert!(refused(b, &leaving).await.contains("revoked"));
    // Logging out again is refused like any other use of it; the denylist holds it once,
    // and no longer the expired one.
    assert_eq!(b.as_user(&leaving).post_empty("/auth/logout").await.0, 401);
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
    let app = TestApp::builder().pods(2).build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let user = app.member(None, Role::Expert).await;
    let other = app.member(Some(user.org), Role::Expert).await.token;
    let t1 = a.login(&user.email, &user.password).await;
    let t2 = b.login(&user.email, &user.password).await;
    let socks = vec![
        connect_with(a, &t1).await,
        connect_with(b, &t2).await,
        connect_with(b, &other).await,
    ];
    assert!(a.sockets_become(1, WITHIN).await && b.sockets_become(2, WITHIN).await);

    assert_eq!(b.as_user(&t1).post_empty("/auth/logout-all").await.0, 204);
    for pod in [a, b] {
        for token in [&t1, &t2] {
            assert_eq!(pod.as_user(token).me().await, (401, json!("token_revoked")));
        }
        assert_eq!(
            pod.as_user(&other).me().await.0,
            200,
            "another user is untouched"
        );
    }
    assert!(
        a.sockets_become(0, WITHIN).await && b.sockets_become(1, WITHIN).await,
        "a session outlived logout-all"
    );
    assert!(refused(a, &t2).await.contains("revoked"));

    // A new login is a new session.
    let fresh = a.login(&user.email, &user.password).await;
    assert_eq!(b.as_user(&fresh).me().await.0, 200);
    let again = connect_with(b, &fresh).await;
    assert!(b.sockets_become(2, WITHIN).await);
    close_all(socks).await;
    again.close().await;
}

#[tokio::test]
async fn removal_while_redis_is_down_still_closes_the_members_sockets_on_both_pods() {
    let mut redis = RedisServer::start().await;
    let app = TestApp::builder().pods(2).redis(&redis.url()).build().await;
    let (a, b, db) = (app.pod(0), app.pod(1), &app.db);
    let admin = app.member(None, Role::Admin).await;
    let org = admin.org;
    let member = app.member(Some(org), Role::Expert).await;
    let expert = b.login(&member.email, &member.password).await;
    let stayer = app.member(Some(org), Role::Expert).await;
    let stays = b.login(&stayer.email, &stayer.password).await;
    let socks = vec![
        connect_with(a, &expert).await,
        connect_with(b, &expert).await,
        connect_with(b, &stays).await,
    ];
    assert!(a.sockets_become(1, WITHIN).await && b.sockets_become(2, WITHIN).await);
    let expert_id = member.id;

    // Redis goes away: the removal's broadcast cannot reach pod B.
    redis.stop();
    let started = Instant::now();
    let removal = format!("/orgs/{org}/members/{expert_id}");
    assert_eq!(a.as_user(&admin.token).delete(&removal).await, 204);
    assert!(
        a.sockets_become(0, WITHIN).await && b.sockets_become(1, WITHIN).await,
        "the removed member's sockets stayed open without Redis"
    );
    assert!(
        started.elapsed() <= WITHIN,
        "closed only after {:?}",
        started.elapsed()
    );
    assert_eq!(b.as_user(&expert).me().await, (401, json!("token_revoked")));
    assert_eq!(b.as_user(&stays).me().await.0, 200);
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
    let app = TestApp::builder().pods(2).build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let admin = app.member(None, Role::Admin).await;
    let member = app.member(Some(admin.org), Role::Expert).await;
    let expert = b.login(&member.email, &member.password).await;
    let removal = format!("/orgs/{}/members/{}", admin.org, member.id);

    // Held after joining its rooms: a handshake that nothing races is admitted.
    let mut hold = b.server.state().realtime.hold_next_handshake();
    let connecting = tokio::spawn({
        let (base, token) = (b.base.clone(), expert.clone());
        async move { connect_url(&base, Some(json!({"token": token}))).await }
    });
    assert!(
        hold.reached(WITHIN).await,
        "the handshake never reached its hold point"
    );
    hold.release();
    let admitted = connecting.await.unwrap().expect("admitted");
    admitted.close().await;
    assert!(b.sockets_become(0, WITHIN).await);

    // Now the removal commits (and broadcasts, finding no socket yet) while the handshake
    // has read the membership and joined the org's room: the read after the join refuses it.
    let mut hold = b.server.state().realtime.hold_next_handshake();
    let connecting = tokio::spawn({
        let (base, token) = (b.base.clone(), expert.clone());
        async move { connect_url(&base, Some(json!({"token": token}))).await }
    });
    assert!(hold.reached(WITHIN).await);
    assert_eq!(a.as_user(&admin.token).delete(&removal).await, 204);
    hold.release();
    let outcome = connecting.await.unwrap();
    let message = outcome
        .err()
        .expect("the racing handshake was admitted")
        .to_string();
    assert!(message.contains("revoked"), "{message}");
    assert_eq!(b.local_sockets(), 0);
}

#[tokio::test]
async fn a_handshake_racing_a_membership_change_without_a_revocation_is_refused_too() {
    // A membership deleted outside the API (an operator's SQL, an org deleted) bumps no
    // version; the read after the join still sees it.
    let app = TestApp::builder().build().await;
    let pod = app.pod(0);
    let expert = app.member(None, Role::Expert).await;
    let (org, token, expert_id) = (expert.org, expert.token, expert.id);
    let other_org = app.member(None, Role::Admin).await.org;
    let pool = app.db.pool().await;
    switchboard_store::users::add_member(&pool, other_org, expert_id, Role::Expert)
        .await
        .unwrap();

    let mut hold = pod.server.state().realtime.hold_next_handshake();
    let connecting = tokio::spawn({
        let (base, token) = (pod.base.clone(), token.clone());
        async move { connect_url(&base, Some(json!({"token": token}))).await }
    });
    assert!(hold.reached(WITHIN).await);
    sqlx::query("DELETE FROM org_members WHERE org_id = $1 AND user_id = $2")
        .bind(org)
        .bind(expert_id)
        .execute(&pool)
        .await
        .unwrap();
    hold.release();
    let message = connecting
        .await
        .unwrap()
        .err()
        .expect("refused")
        .to_string();
    assert!(message.contains("memberships changed"), "{message}");
    assert_eq!(pod.local_sockets(), 0);

    // Connected, the same change is found by the pod's session check (no Redis involved).
    let sock = connect_with(pod, &token).await;
    assert!(pod.sockets_become(1, WITHIN).await);
    sqlx::query("DELETE FROM org_members WHERE org_id = $1 AND user_id = $2")
        .bind(other_org)
        .bind(expert_id)
        .execute(&pool)
        .await
        .unwrap();
    let check = pod.server.state().realtime.check_sessions().await.unwrap();
    assert_eq!((check.sockets, check.closed), (1, 1));
    assert!(pod.sockets_become(0, WITHIN).await);
    sock.close().await;
    pool.close().await;
}

#[tokio::test]
async fn one_check_is_one_query_over_the_users_of_all_the_pods_sockets() {
    let app = TestApp::builder().build().await;
    let pod = app.pod(0);
    let me = app.member(None, Role::Expert).await;
    let mine = me.token;
    let theirs = app.member(Some(me.org), Role::Admin).await.token;
    let mut socks = Vec::new();
    for i in 0..20 {
        socks.push(connect_with(pod, if i % 2 == 0 { &mine } else { &theirs }).await);
    }
    assert!(pod.sockets_become(20, WITHIN).await);
    let check = pod.server.state().realtime.check_sessions().await.unwrap();
    assert_eq!((check.sockets, check.users, check.closed), (20, 2, 0));

    assert_eq!(
        pod.as_user(&mine).post_empty("/auth/logout-all").await.0,
        204
    );
    assert!(pod.sockets_become(10, WITHIN).await);
    close_all(socks).await;
}
