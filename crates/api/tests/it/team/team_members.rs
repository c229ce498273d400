//! Members and accounts from the console: invitations (mailed, single-use, expiring,
//! revocable; accepted by a new user or an existing one), role changes, per-org
//! deactivation (sessions and sockets end on every pod within seconds), the last-admin rule,
//! a user's own password change, and password resets by mail.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_domain::Role;
use switchboard_testing::socket::connect_with;
use switchboard_testing::{Call, TestApp, TestDb, eventually};
use uuid::Uuid;

/// SPEC §11's bound on a revoked session's sockets.
const WITHIN: Duration = Duration::from_secs(5);

fn mail_app() -> switchboard_testing::TestAppBuilder {
    TestApp::builder()
        .fake_provider()
        .env("MAIL_FROM", "Switchboard <team@example.com>")
        .env("MAIL_RESEND_API_KEY", "re_test_key")
}

/// The mails the fake Resend took for `to`.
fn mails_to(app: &TestApp, to: &str) -> Vec<Value> {
    app.provider()
        .calls("resend")
        .iter()
        .map(Call::json)
        .filter(|m| m["to"].to_string().contains(to))
        .collect()
}

/// The token at the end of a console link `…/#/{route}/<token>`.
fn token_of(link: &str, route: &str) -> String {
    let marker = format!("/#/{route}/");
    let at = link.find(&marker).expect("a console link") + marker.len();
    link[at..]
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap()
        .to_owned()
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.count(sql).await
}

fn unique_email(tag: &str) -> String {
    format!("{tag}-{}@example.com", Uuid::new_v4().simple())
}

#[tokio::test]
async fn invite_mails_a_link_that_makes_a_member_once() {
    let app = mail_app().build().await;
    let (a, db) = (app.pod(0), &app.db);
    let admin = app.member(None, Role::Admin).await;
    let expert = app.member(Some(admin.org), Role::Expert).await;
    let stranger = app.member(None, Role::Admin).await;
    let path = format!("/orgs/{}/invitations", admin.org);
    let email = unique_email("invitee");

    // Experts and other orgs' admins are refused; bad input changes nothing.
    for token in [&expert.token, &stranger.token] {
        let (status, _) = a
            .as_user(token)
            .post(&path, json!({"email": email, "role": "expert"}))
            .await;
        assert_eq!(status, 403);
        assert_eq!(a.as_user(token).get(&path).await.0, 403);
    }
    for bad in [
        json!({"email": "not an address", "role": "expert"}),
        json!({"email": email, "role": "owner"}),
        json!({"email": "", "role": "admin"}),
    ] {
        let (status, body) = a.as_user(&admin.token).post(&path, bad).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["code"], "validation_failed");
    }
    assert_eq!(count(db, "SELECT count(*) FROM invitations").await, 0);
    // A member already is not invited again.
    let (status, body) = a
        .as_user(&admin.token)
        .post(&path, json!({"email": expert.email, "role": "admin"}))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (409, json!("already_member"))
    );

    let (status, invited) = a
        .as_user(&admin.token)
        .post(
            &path,
            json!({"email": email.to_uppercase(), "role": "expert"}),
        )
        .await;
    assert_eq!(status, 201, "{invited}");
    assert_eq!(invited["mail"], "sent");
    assert_eq!(invited["invitation"]["email"], email);
    let link = invited["link"].as_str().unwrap();
    assert!(
        link.starts_with("https://switchboard.test/#/accept/"),
        "{link}"
    );
    let token = token_of(link, "accept");
    // Only the hash is stored.
    assert_eq!(
        count(
            db,
            &format!("SELECT count(*) FROM invitations WHERE encode(token_sha256, 'escape') LIKE '%{token}%'")
        )
        .await,
        0
    );
    let mails = eventually("the invitation mail", WITHIN, || async {
        let m = mails_to(&app, &email);
        (!m.is_empty()).then_some(m)
    })
    .await;
    assert!(
        mails[0]["text"].as_str().unwrap().contains(link),
        "{}",
        mails[0]
    );

    let (status, listed) = a.as_user(&admin.token).get(&path).await;
    assert_eq!(status, 200);
    assert_eq!(listed["invitations"].as_array().unwrap().len(), 1);

    let (status, preview) = a
        .post_anonymous("/invitations/preview", json!({"token": token}))
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["existing_account"], false);
    assert_eq!(preview["role"], "expert");

    // A short password changes nothing.
    let (status, body) = a
        .post_anonymous(
            "/invitations/accept",
            json!({"token": token, "password": "short", "display_name": "New One"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("validation_failed"))
    );
    assert_eq!(
        count(
            db,
            &format!("SELECT count(*) FROM users WHERE email = '{email}'")
        )
        .await,
        0
    );

    let (status, accepted) = a
        .post_anonymous(
            "/invitations/accept",
            json!({"token": token, "password": "a long new password", "display_name": "New One"}),
        )
        .await;
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(accepted["role"], "expert");
    assert_eq!(accepted["user"]["display_name"], "New One");
    let new_token = accepted["token"].as_str().unwrap();
    let (status, me) = a.as_user(new_token).get("/auth/me").await;
    assert_eq!(status, 200);
    assert_eq!(me["orgs"], json!([{"org_id": admin.org, "role": "expert"}]));
    a.login(&email, "a long new password").await;

    // Single use.
    let (status, body) = a
        .post_anonymous(
            "/invitations/accept",
            json!({"token": token, "password": "another password"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (410, json!("invitation_used"))
    );
    let (_, listed) = a.as_user(&admin.token).get(&path).await;
    assert_eq!(listed["invitations"], json!([]));
    assert_eq!(
        count(
            db,
            "SELECT count(*) FROM audit_log WHERE action IN ('invitation.created', 'invitation.accepted')"
        )
        .await,
        2
    );
}

#[tokio::test]
async fn invitations_expire_can_be_revoked_and_join_existing_accounts() {
    // No system mail: the link is returned all the same.
    let app = TestApp::builder().build().await;
    let (a, db) = (app.pod(0), &app.db);
    let admin = app.member(None, Role::Admin).await;
    let path = format!("/orgs/{}/invitations", admin.org);
    let invite = |email: String, role: &'static str| {
        let token = admin.token.clone();
        let path = path.clone();
        async move {
            let (status, body) = a
                .as_user(&token)
                .post(&path, json!({"email": email, "role": role}))
                .await;
            assert_eq!(status, 201, "{body}");
            assert_eq!(body["mail"], "not_configured");
            body
        }
    };

    let expiring = invite(unique_email("late"), "expert").await;
    let pool = db.pool().await;
    sqlx::query("UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(Uuid::parse_str(expiring["invitation"]["id"].as_str().unwrap()).unwrap())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let token = token_of(expiring["link"].as_str().unwrap(), "accept");
    let (status, body) = a
        .post_anonymous(
            "/invitations/accept",
            json!({"token": token, "password": "a long new password"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (410, json!("invitation_expired"))
    );

    let revoked = invite(unique_email("withdrawn"), "admin").await;
    let id = revoked["invitation"]["id"].as_str().unwrap();
    let stranger = app.member(None, Role::Admin).await;
    assert_eq!(
        a.as_user(&stranger.token)
            .delete(&format!("{path}/{id}"))
            .await,
        403
    );
    assert_eq!(
        a.as_user(&admin.token)
            .delete(&format!("{path}/{id}"))
            .await,
        204
    );
    assert_eq!(
        a.as_user(&admin.token)
            .delete(&format!("{path}/{id}"))
            .await,
        404
    );
    let token = token_of(revoked["link"].as_str().unwrap(), "accept");
    let (status, body) = a
        .post_anonymous("/invitations/preview", json!({"token": token}))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (410, json!("invitation_revoked"))
    );
    let (status, body) = a
        .post_anonymous("/invitations/preview", json!({"token": "not-a-token"}))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (404, json!("invitation_not_found"))
    );

    // Someone with an account elsewhere joins with their current password.
    let elsewhere = app.member(None, Role::Expert).await;
    let invited = invite(elsewhere.email.clone(), "admin").await;
    let token = token_of(invited["link"].as_str().unwrap(), "accept");
    let (_, preview) = a
        .post_anonymous("/invitations/preview", json!({"token": token}))
        .await;
    assert_eq!(preview["existing_account"], true);
    let (status, body) = a
        .post_anonymous(
            "/invitations/accept",
            json!({"token": token, "password": "not their password"}),
        )
        .await;
    assert_eq!(status, 401, "{body}");
    let (status, accepted) = a
        .post_anonymous(
            "/invitations/accept",
            json!({"token": token, "password": elsewhere.password}),
        )
        .await;
    assert_eq!(status, 200, "{accepted}");
    let (_, me) = a
        .as_user(accepted["token"].as_str().unwrap())
        .get("/auth/me")
        .await;
    let orgs = me["orgs"].as_array().unwrap();
    assert_eq!(orgs.len(), 2, "{me}");
    assert!(orgs.contains(&json!({"org_id": admin.org, "role": "admin"})));
    // Their other session goes on: joining an org ends nothing.
    assert_eq!(a.as_user(&elsewhere.token).me().await.0, 200);
}

#[tokio::test]
async fn roles_change_and_the_last_admin_stays() {
    let app = TestApp::builder().build().await;
    let a = app.pod(0);
    let admin = app.member(None, Role::Admin).await;
    let expert = app.member(Some(admin.org), Role::Expert).await;
    let stranger = app.member(None, Role::Admin).await;
    let members = format!("/orgs/{}/members", admin.org);
    let of = |id: Uuid| format!("{members}/{id}");

    assert_eq!(a.as_user(&expert.token).get(&members).await.0, 403);
    assert_eq!(a.as_user(&stranger.token).get(&members).await.0, 403);
    let (status, listed) = a.as_user(&admin.token).get(&members).await;
    assert_eq!(status, 200);
    assert_eq!(listed["members"].as_array().unwrap().len(), 2);

    for token in [&expert.token, &stranger.token] {
        let (status, _) = a
            .as_user(token)
            .patch(&of(expert.id), json!({"role": "admin"}))
            .await;
        assert_eq!(status, 403);
    }
    let (status, body) = a
        .as_user(&admin.token)
        .patch(&of(expert.id), json!({"role": "boss"}))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("validation_failed"))
    );
    assert_eq!(
        a.as_user(&expert.token).get(&members).await.0,
        403,
        "unchanged"
    );

    // The last admin can be neither demoted, deactivated nor removed.
    let (status, body) = a
        .as_user(&admin.token)
        .patch(&of(admin.id), json!({"role": "expert"}))
        .await;
    assert_eq!((status, body["code"].clone()), (409, json!("last_admin")));
    let (status, body) = a
        .as_user(&admin.token)
        .post_empty(&format!("{}/deactivate", of(admin.id)))
        .await;
    assert_eq!((status, body["code"].clone()), (409, json!("last_admin")));
    assert_eq!(a.as_user(&admin.token).delete(&of(admin.id)).await, 409);

    let (status, changed) = a
        .as_user(&admin.token)
        .patch(&of(expert.id), json!({"role": "admin"}))
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["role"], "admin");
    // At the promoted member's next request, with the same token.
    assert_eq!(a.as_user(&expert.token).get(&members).await.0, 200);
    // Two admins now: the first one can step down.
    let (status, _) = a
        .as_user(&admin.token)
        .patch(&of(admin.id), json!({"role": "expert"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(a.as_user(&admin.token).get(&members).await.0, 403);
    let (status, body) = a
        .as_user(&expert.token)
        .patch(&of(expert.id), json!({"role": "expert"}))
        .await;
    assert_eq!((status, body["code"].clone()), (409, json!("last_admin")));
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM audit_log WHERE action = 'org_member.role_changed'")
            .await,
        2
    );
}

#[tokio::test]
async fn deactivation_stops_a_live_socket_on_another_pod_and_the_login() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let admin = app.member(None, Role::Admin).await;
    let expert = app.member(Some(admin.org), Role::Expert).await;
    let other = app.member(Some(admin.org), Role::Expert).await;
    let on_b = b.login(&expert.email, &expert.password).await;
    let socks = vec![
        connect_with(b, &on_b).await,
        connect_with(b, &other.token).await,
    ];
    assert!(b.sockets_become(2, WITHIN).await);
    let member = format!("/orgs/{}/members/{}", admin.org, expert.id);

    assert_eq!(
        a.as_user(&other.token)
            .post_empty(&format!("{member}/deactivate"))
            .await
            .0,
        403
    );
    let started = tokio::time::Instant::now();
    let (status, body) = a
        .as_user(&admin.token)
        .post_empty(&format!("{member}/deactivate"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["deactivated_at"].is_string());
    for token in [&expert.token, &on_b] {
        assert_eq!(b.as_user(token).me().await, (401, json!("token_revoked")));
    }
    assert!(
        b.sockets_become(1, WITHIN).await,
        "the deactivated member's socket outlived it"
    );
    assert!(started.elapsed() <= WITHIN);
    assert_eq!(a.as_user(&other.token).me().await.0, 200, "others go on");
    let (status, body) = a.try_login(&expert.email, &expert.password).await;
    assert_eq!(
        (status, body["code"].clone()),
        (401, json!("user_deactivated"))
    );
    let (_, listed) = a
        .as_user(&admin.token)
        .get(&format!("/orgs/{}/members", admin.org))
        .await;
    let row = listed["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["user_id"] == json!(expert.id))
        .cloned()
        .unwrap();
    assert!(row["deactivated_at"].is_string(), "{row}");

    let (status, body) = a
        .as_user(&admin.token)
        .post_empty(&format!("{member}/reactivate"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["deactivated_at"].is_null());
    assert_eq!(
        b.as_user(&on_b).me().await.0,
        401,
        "old tokens stay revoked"
    );
    let fresh = b.login(&expert.email, &expert.password).await;
    assert_eq!(a.as_user(&fresh).me().await.0, 200);
    for s in socks {
        s.close().await;
    }
}

#[tokio::test]
async fn changing_ones_password_ends_the_other_sessions() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let user = app.member(None, Role::Expert).await;
    let here = a.login(&user.email, &user.password).await;
    let elsewhere = b.login(&user.email, &user.password).await;
    let sock = connect_with(b, &elsewhere).await;
    assert!(b.sockets_become(1, WITHIN).await);

    let (status, body) = a
        .as_user(&here)
        .post(
            "/auth/password",
            json!({"current_password": "wrong one!", "new_password": "a brand new one"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (403, json!("wrong_password"))
    );
    let (status, body) = a
        .as_user(&here)
        .post(
            "/auth/password",
            json!({"current_password": user.password, "new_password": "short"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("validation_failed"))
    );
    assert_eq!(a.as_user(&elsewhere).me().await.0, 200, "nothing changed");
    a.login(&user.email, &user.password).await;

    let (status, changed) = a
        .as_user(&here)
        .post(
            "/auth/password",
            json!({"current_password": user.password, "new_password": "a brand new one"}),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    let fresh = changed["token"].as_str().unwrap();
    assert_eq!(b.as_user(fresh).me().await.0, 200);
    assert_eq!(
        b.as_user(&elsewhere).me().await,
        (401, json!("token_revoked"))
    );
    assert!(
        b.sockets_become(0, WITHIN).await,
        "the other session's socket"
    );
    assert_eq!(a.try_login(&user.email, &user.password).await.0, 401);
    a.login(&user.email, "a brand new one").await;
    sock.close().await;
}

#[tokio::test]
async fn password_reset_mails_a_single_use_link_and_says_nothing_of_unknown_addresses() {
    let app = mail_app()
        .env("RATE_LIMIT_PASSWORD_RESET", "2/hour")
        .build()
        .await;
    let (a, db) = (app.pod(0), &app.db);
    let user = app.member(None, Role::Expert).await;
    let unknown = unique_email("nobody");

    let (status, body) = a
        .post_anonymous("/auth/password-reset", json!({"email": "nope"}))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("validation_failed"))
    );
    let (status, unknown_body) = a
        .post_anonymous("/auth/password-reset", json!({"email": unknown}))
        .await;
    let (known_status, known_body) = a
        .post_anonymous(
            "/auth/password-reset",
            json!({"email": user.email.to_uppercase()}),
        )
        .await;
    assert_eq!((status, known_status), (202, 202));
    assert_eq!(unknown_body, known_body, "the same answer");
    let mail = eventually("the reset mail", WITHIN, || async {
        mails_to(&app, &user.email).into_iter().next()
    })
    .await;
    let text = mail["text"].as_str().unwrap();
    assert!(text.contains("https://switchboard.test/#/reset/"), "{text}");
    let token = token_of(text, "reset");
    // The unknown address's request finished (its audit row) and sent nothing.
    db.wait_for_count(
        "SELECT count(*) FROM audit_log WHERE action = 'auth.password_reset_requested'",
        2,
    )
    .await;
    assert_eq!(
        db.count(
            "SELECT count(*) FROM audit_log WHERE action = 'auth.password_reset_requested'
             AND details->>'link_sent' = 'false' AND actor_user_id IS NULL"
        )
        .await,
        1
    );
    assert!(mails_to(&app, &unknown).is_empty());

    let (status, body) = a
        .post_anonymous(
            "/auth/password-reset/confirm",
            json!({"token": token, "new_password": "short"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("validation_failed"))
    );
    assert_eq!(a.as_user(&user.token).me().await.0, 200, "nothing changed");

    let (status, _) = a
        .post_anonymous(
            "/auth/password-reset/confirm",
            json!({"token": token, "new_password": "reset to this one"}),
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(
        a.as_user(&user.token).me().await,
        (401, json!("token_revoked"))
    );
    a.login(&user.email, "reset to this one").await;
    let (status, body) = a
        .post_anonymous(
            "/auth/password-reset/confirm",
            json!({"token": token, "new_password": "and once more"}),
        )
        .await;
    assert_eq!((status, body["code"].clone()), (410, json!("reset_used")));

    // An expired link.
    a.post_anonymous("/auth/password-reset", json!({"email": user.email}))
        .await;
    let second = eventually("a second reset mail", WITHIN, || async {
        let m = mails_to(&app, &user.email);
        (m.len() >= 2).then(|| m[1].clone())
    })
    .await;
    let pool = db.pool().await;
    sqlx::query("UPDATE password_resets SET expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let (status, body) = a.post_anonymous("/auth/password-reset/confirm",
        json!({"token": token_of(second["text"].as_str().unwrap(), "reset"), "new_password": "and once more"}),
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (410, json!("reset_expired"))
    );

    // Over the per-address limit: the same answer, no mail.
    let (status, _) = a
        .post_anonymous("/auth/password-reset", json!({"email": user.email}))
        .await;
    assert_eq!(status, 202);
    db.wait_for_count(
        "SELECT count(*) FROM audit_log WHERE action = 'auth.password_reset_requested'",
        4,
    )
    .await;
    assert_eq!(
        db.count(
            "SELECT count(*) FROM audit_log WHERE action = 'auth.password_reset_requested'
             AND details->>'link_sent' = 'true'"
        )
        .await,
        2,
        "the third request is over the limit"
    );
    assert_eq!(mails_to(&app, &user.email).len(), 2);
}

#[tokio::test]
async fn two_admins_demoting_each_other_at_once_leave_one_admin() {
    let app = TestApp::builder().pods(2).build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    for _ in 0..5 {
        let first = app.member(None, Role::Admin).await;
        let second = app.member(Some(first.org), Role::Admin).await;
        let path = |id: Uuid| format!("/orgs/{}/members/{id}", first.org);
        let (p1, p2) = (path(second.id), path(first.id));
        let demote = json!({"role": "expert"});
        let ((s1, _), (s2, _)) = tokio::join!(
            a.as_user(&first.token).patch(&p1, demote.clone()),
            b.as_user(&second.token).patch(&p2, demote.clone()),
        );
        let mut statuses = [s1, s2];
        statuses.sort_unstable();
        // Each request is checked under the org's lock: the second sees the first's result
        // (or, refused for lack of the role, never acts).
        assert!(
            statuses == [200, 403] || statuses == [200, 409],
            "{statuses:?}"
        );
        let admins = app
            .db
            .count(&format!(
                "SELECT count(*) FROM org_members WHERE org_id = '{}' AND role = 'admin'",
                first.org
            ))
            .await;
        assert_eq!(admins, 1);
    }
}
