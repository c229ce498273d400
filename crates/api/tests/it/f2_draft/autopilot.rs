//! The autopilot's policy over HTTP: stored as given with its defaults, refused with the
//! field named and nothing changed, audited with what it replaced, paused by the kill switch
//! or by `AUTOPILOT=off` at a pod's start; for the org's admins only.

use serde_json::{Value, json};
use switchboard_domain::Role;
use switchboard_testing::TestApp;

fn policy() -> Value {
    json!({
        "enabled": true,
        "channels": {
            "telegram": {"enabled": true, "min_confidence": 0.9, "hold_secs": 30},
            "email": {"enabled": false, "min_confidence": 0.95}
        },
        "business_hours": {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "18:00"},
        "never_when": {"new_customer": true, "phrases": ["refund", "talk to a human"]},
        "max_per_hour": 50
    })
}

#[tokio::test]
async fn the_policy_is_stored_validated_audited_and_paused() {
    let app = TestApp::builder().build().await;
    let org = app.org().await;
    let admin = app.pod(0).as_user(&org.token);
    let path = format!("/orgs/{}/autopilot", org.id);

    let (status, body) = admin.get(&path).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["enabled"], false, "never set reads as off: {body}");
    assert_eq!(body["never_when"]["fallback"], true);

    let (status, stored) = admin.put(&path, policy()).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(
        stored["channels"]["email"]["hold_secs"], 60,
        "the default hold"
    );
    assert_eq!(stored["never_when"]["unknown_link_or_number"], true);
    assert_eq!(stored["never_when"]["flagged"], true);
    assert_eq!(admin.get(&path).await.1, stored);

    // Out of bounds: 422 naming the field; not a policy: 400; nothing changes either way.
    let mut bad = policy();
    bad["channels"]["telegram"]["hold_secs"] = json!(5);
    let (status, body) = admin.put(&path, bad).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("channels.telegram.hold_secs"),
        "{body}"
    );
    let mut bad = policy();
    bad["channels"]["telegram"]["min_confidence"] = json!(1.5);
    let (status, body) = admin.put(&path, bad).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("min_confidence"),
        "{body}"
    );
    let mut bad = policy();
    bad["never_when"]["fallback"] = json!(false);
    assert_eq!(admin.put(&path, bad).await.0, 422);
    let mut bad = policy();
    bad["business_hours"]["end"] = json!("25:00");
    assert_eq!(admin.put(&path, bad).await.0, 422);
    for bad in [
        json!({"enabled": true, "channels": {"fax": {"enabled": true, "min_confidence": 0.5}}}),
        json!({"enable": true}),
        json!({"enabled": "yes"}),
    ] {
        let (status, body) = admin.put(&path, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    assert_eq!(admin.get(&path).await.1, stored, "refusals changed nothing");

    // The kill switch: off at once, the rules kept.
    let (status, paused) = admin.post_empty(&format!("{path}/pause")).await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["enabled"], false);
    assert_eq!(paused["channels"], stored["channels"]);
    assert_eq!(admin.get(&path).await.1, paused);

    // Audited with what each change replaced.
    let rows: Vec<(String, Value)> = sqlx::query_as(
        "SELECT action, details FROM audit_log WHERE org_id = $1 AND action LIKE 'autopilot.%'
          ORDER BY id",
    )
    .bind(org.id)
    .fetch_all(&app.db.pool().await)
    .await
    .unwrap();
    let actions: Vec<&str> = rows.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(actions, ["autopilot.updated", "autopilot.paused"]);
    assert_eq!(rows[0].1["before"]["enabled"], false);
    assert_eq!(rows[0].1["after"], stored);
    assert_eq!(rows[1].1["before"], stored);
    assert_eq!(rows[1].1["after"], paused);
}

#[tokio::test]
async fn only_the_orgs_admins_see_or_change_the_autopilot() {
    let app = TestApp::builder().build().await;
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    let stranger = app.member(None, Role::Admin).await;
    let path = format!("/orgs/{}/autopilot", org.id);
    for token in [&expert.token, &stranger.token] {
        let user = app.pod(0).as_user(token);
        assert_eq!(user.get(&path).await.0, 403);
        assert_eq!(app.pod(0).as_user(token).put(&path, policy()).await.0, 403);
        assert_eq!(
            app.pod(0)
                .as_user(token)
                .post_empty(&format!("{path}/pause"))
                .await
                .0,
            403
        );
    }
    let (status, body) = app.pod(0).as_user(&org.token).get(&path).await;
    assert_eq!((status, &body["enabled"]), (200, &json!(false)), "{body}");
    let unknown = format!("/orgs/{}/autopilot", uuid::Uuid::new_v4());
    assert_eq!(app.pod(0).as_user(&org.token).get(&unknown).await.0, 403);
}

#[tokio::test]
async fn autopilot_off_turns_every_orgs_policy_off_when_a_pod_starts() {
    let mut app = TestApp::builder().build().await;
    let on = app.org().await;
    let off = app.org().await;
    let mut never = policy();
    never["enabled"] = json!(false);
    for (org, body) in [(&on, policy()), (&off, never)] {
        let path = format!("/orgs/{}/autopilot", org.id);
        let (status, _) = app.pod(0).as_user(&org.token).put(&path, body).await;
        assert_eq!(status, 200);
    }
    app.start_pod(&[("AUTOPILOT", "off")]).await;
    let (_, now) = app
        .pod(1)
        .as_user(&on.token)
        .get(&format!("/orgs/{}/autopilot", on.id))
        .await;
    assert_eq!(now["enabled"], false, "{now}");
    assert_eq!(
        now["channels"]["telegram"]["min_confidence"], 0.9,
        "rules kept"
    );
    let audited = app
        .db
        .count(&format!(
            "SELECT count(*) FROM audit_log WHERE action = 'autopilot.paused' AND org_id = '{}'",
            on.id
        ))
        .await;
    assert_eq!(audited, 1);
    let untouched = app
        .db
        .count(&format!(
            "SELECT count(*) FROM audit_log WHERE action = 'autopilot.paused' AND org_id = '{}'",
            off.id
        ))
        .await;
    assert_eq!(
        untouched, 0,
        "an org whose autopilot was off is not paused again"
    );
}
