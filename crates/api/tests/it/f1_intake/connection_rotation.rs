//! Rotating a connection's secrets in place (`PATCH /channel-connections/{id}`): the
//! replaced webhook secret keeps verifying on every pod until its expiry and not after it,
//! a provider token switches at once, values never come back out, and a refused change
//! writes nothing.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use switchboard_domain::{ChannelKind, Role};
use switchboard_testing::signing::{
    self, SLACK_SECRET, Signed, TELEGRAM_SECRET, WHATSAPP_TOKEN, WHSEC,
};
use switchboard_testing::{Org, TestApp, TestDb, TestPod, eventually, settled, wait_outbox};
use uuid::Uuid;

const NEW_SECRET: &str = "slack-signing-secret-rotated";

/// Numbers the test's Slack events, so none is a duplicate of another.
struct Events(Cell<u32>);

impl Events {
    fn new() -> Self {
        Self(Cell::new(0))
    }

    /// The next message event, signed with `secret`.
    fn slack(&self, secret: &str) -> Signed {
        let n = self.0.get() + 1;
        self.0.set(n);
        let ts = format!("1700000000.{n:06}");
        signing::slack(secret, &format!("EvRot{n}"), "U1", &ts, "hi")
    }
}

/// A webhook's status, having checked that a 200 stored a new event.
fn checked((status, body): (u16, String)) -> u16 {
    if status == 200 {
        assert!(body.contains("accepted"), "{body}");
    }
    status
}

/// Awaits `pod` answering Slack webhooks from its cache (a live subscription holding the
/// connection): what a rotation on another pod has to reach.
async fn cached_on(pod: &TestPod, path: &str, events: &Events) {
    let cache = &pod.server.state().connections;
    let served_from_cache = || async {
        let before = cache.queries();
        assert_eq!(
            checked(pod.send_webhook(path, &events.slack(SLACK_SECRET)).await),
            200
        );
        (cache.queries() == before).then_some(())
    };
    eventually(
        "the pod caches the connection",
        Duration::from_secs(5),
        served_from_cache,
    )
    .await;
}

/// Awaits `pod` giving `want` for webhooks signed with `secret` (5 s at most, far below the
/// cache's 60 s TTL: a change reaches the pod by its invalidation, not by expiry); the last
/// status.
async fn answers(pod: &TestPod, path: &str, events: &Events, secret: &str, want: u16) -> u16 {
    let send = || async { checked(pod.send_webhook(path, &events.slack(secret)).await) };
    settled(Duration::from_secs(5), send, |s| *s == want).await
}

fn connection_path(org: &Org, channel: &str) -> String {
    format!("/channel-connections/{}", org.conns[channel])
}

async fn updates(db: &TestDb) -> i64 {
    db.count("SELECT count(*) FROM audit_log WHERE action = 'channel_connection.updated'")
        .await
}

#[tokio::test]
async fn a_signing_secret_rotated_on_one_pod_verifies_with_either_secret_on_every_pod() {
    let app = TestApp::builder().pods(2).no_workers().build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org().await;
    let (path, events) = (org.webhook("slack"), Events::new());
    cached_on(b, &path, &events).await;

    // Webhooks signed with the old secret keep arriving at B while A rotates it.
    let admin = a.as_user(&org.token);
    let rotated = AtomicBool::new(false);
    let rotate = async {
        let body = json!({"secrets": {"signing_secret": NEW_SECRET}});
        let answer = admin.patch(&connection_path(&org, "slack"), body).await;
        rotated.store(true, Ordering::SeqCst);
        answer
    };
    let meanwhile = async {
        let (mut statuses, mut after) = (Vec::new(), 0);
        while after < 5 {
            after += u32::from(rotated.load(Ordering::SeqCst));
            statuses.push(checked(
                b.send_webhook(&path, &events.slack(SLACK_SECRET)).await,
            ));
        }
        statuses
    };
    let ((status, body), meanwhile) = tokio::join!(rotate, meanwhile);
    assert_eq!(status, 200, "{body}");
    assert!(meanwhile.iter().all(|s| *s == 200), "{meanwhile:?}");

    // A dropped its own copy before answering; B drops its copy when A's notice arrives.
    assert_eq!(
        checked(a.send_webhook(&path, &events.slack(NEW_SECRET)).await),
        200
    );
    let started = Instant::now();
    assert_eq!(answers(b, &path, &events, NEW_SECRET, 200).await, 200);
    assert!(started.elapsed() < Duration::from_secs(5));

    // From then on either secret verifies on either pod, and nothing else does.
    for pod in [a, b, a, b] {
        assert_eq!(
            checked(pod.send_webhook(&path, &events.slack(SLACK_SECRET)).await),
            200
        );
        assert_eq!(
            checked(pod.send_webhook(&path, &events.slack(NEW_SECRET)).await),
            200
        );
        assert_eq!(
            checked(pod.send_webhook(&path, &events.slack("a-guess")).await),
            401
        );
    }
}

#[tokio::test]
async fn the_old_secret_stops_verifying_at_its_expiry_though_nothing_removed_it() {
    let app = TestApp::builder().pods(2).no_workers().build().await;
    let (a, b) = (app.pod(0), app.pod(1));
    let org = app.org().await;
    let (path, events) = (org.webhook("slack"), Events::new());
    cached_on(b, &path, &events).await;
    let conn = connection_path(&org, "slack");
    let body =
        json!({"secrets": {"signing_secret": NEW_SECRET}, "previous_secret_expires_in_secs": 3});
    let (status, body) = b.as_user(&org.token).patch(&conn, body).await;
    assert_eq!(status, 200, "{body}");
    let field = &body["secret_fields"][0];
    assert_eq!(field["name"], "signing_secret");
    let expires_at: DateTime<Utc> = field["previous_expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // Within the overlap both verify, on both pods (A once B's notice has reached it).
    assert_eq!(answers(a, &path, &events, NEW_SECRET, 200).await, 200);
    for pod in [a, b] {
        assert_eq!(
            checked(pod.send_webhook(&path, &events.slack(SLACK_SECRET)).await),
            200
        );
    }
    assert!(
        Utc::now() < expires_at,
        "the checks above took longer than the overlap"
    );

    // At the expiry the old one is refused everywhere, and the new one still verifies.
    for pod in [a, b] {
        let refused =
            || async { checked(pod.send_webhook(&path, &events.slack(SLACK_SECRET)).await) };
        let status = settled(Duration::from_secs(10), refused, |s| *s == 401).await;
        assert_eq!(status, 401);
        assert!(Utc::now() >= expires_at, "refused before its expiry");
        assert_eq!(
            checked(pod.send_webhook(&path, &events.slack(NEW_SECRET)).await),
            200
        );
    }
    let (status, error) = a.send_webhook(&path, &events.slack(SLACK_SECRET)).await;
    assert_eq!(status, 401);
    assert!(error.contains("invalid_signature"), "{error}");

    // Nothing had removed it: the expiry alone refuses it. The API shows it gone, and the
    // next write drops it.
    let stored = "SELECT count(*) FROM channel_connections WHERE previous_secrets_expire_at ? 'signing_secret'";
    assert_eq!(app.db.count(stored).await, 1);
    let admin = a.as_user(&org.token);
    let (_, shown) = admin.get(&conn).await;
    assert_eq!(
        shown["secret_fields"][0]["previous_expires_at"],
        Value::Null
    );
    let (status, _) = admin.patch(&conn, json!({"name": "slack-renamed"})).await;
    assert_eq!(status, 200);
    assert_eq!(app.db.count(stored).await, 0);
    assert_eq!(
        checked(b.send_webhook(&path, &events.slack(NEW_SECRET)).await),
        200
    );
}

#[tokio::test]
async fn a_new_bot_token_is_used_by_the_very_next_reply() {
    let app = TestApp::builder().pods(2).fakes().build().await;
    let org = app.org().await;
    let first = signing::slack(SLACK_SECRET, "EvBot1", "U1", "1700000001.000100", "hi");
    assert_eq!(
        app.pod(1)
            .send_webhook(&org.webhook("slack"), &first)
            .await
            .0,
        200
    );
    app.db
        .wait_for_count("SELECT count(*) FROM drafts", 1)
        .await;

    // Replaced on B, the token is what A's reply goes out with: no overlap for outbound.
    let body = json!({"secrets": {"bot_token": "xoxb-rotated"}});
    let conn = connection_path(&org, "slack");
    let (status, shown) = app.pod(1).as_user(&org.token).patch(&conn, body).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["secret_fields"][1],
        json!({"name": "bot_token", "verifies_webhooks": false, "previous_expires_at": null})
    );
    let pool = app.db.pool().await;
    let item: Uuid = sqlx::query_scalar("SELECT id FROM expert_queue WHERE status = 'pending'")
        .fetch_one(&pool)
        .await
        .unwrap();
    let outbox = app
        .pod(0)
        .as_user(&org.token)
        .release_ok(item, Some("reply"))
        .await;
    wait_outbox(&app.db, outbox, "sent").await;
    let calls = app.provider().calls("slack");
    let tokens: Vec<&str> = calls.iter().map(|c| c.header("authorization")).collect();
    assert_eq!(tokens, ["Bearer xoxb-rotated"]);
}

#[tokio::test]
async fn secrets_show_by_name_and_expiry_never_by_value_and_the_change_is_audited() {
    let app = TestApp::builder().no_workers().build().await;
    let admin = app.member(None, Role::Admin).await;
    let user = app.pod(0).as_user(&admin.token);
    let secrets = json!({"signing_secret": "sign-SECRET-1", "bot_token": "xoxb-SECRET-1"});
    let id = user
        .create_connection_with(admin.org, "slack", "support", secrets)
        .await;
    let path = format!("/channel-connections/{id}");
    let before = Utc::now();
    let body = json!({
        "secrets": {"signing_secret": "sign-SECRET-2", "bot_token": "xoxb-SECRET-2"},
        "previous_secret_expires_in_secs": 3600,
        "settings": {"team": "T2"}
    });
    let (status, updated) = user.patch(&path, body).await;
    assert_eq!(status, 200, "{updated}");
    let after = Utc::now();
    assert_eq!(updated["settings"], json!({"team": "T2"}));
    assert_eq!(updated["name"], "support");
    assert_eq!(
        updated["webhook_url"],
        format!("https://switchboard.test/webhooks/slack/{id}"),
        "the webhook URL stays"
    );
    let fields = &updated["secret_fields"];
    assert_eq!(fields.as_array().unwrap().len(), 2, "{fields}");
    assert_eq!(fields[0]["name"], "signing_secret");
    assert_eq!(fields[0]["verifies_webhooks"], true);
    let expires: DateTime<Utc> = fields[0]["previous_expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let hour = chrono::Duration::hours(1);
    assert!(
        before + hour - chrono::Duration::seconds(1) <= expires && expires <= after + hour,
        "{expires}"
    );
    assert_eq!(
        fields[1],
        json!({"name": "bot_token", "verifies_webhooks": false, "previous_expires_at": null})
    );

    // The same on every read, and never a value.
    let (_, one) = user.get(&path).await;
    assert_eq!(one["secret_fields"], *fields);
    let (_, list) = user.get("/channel-connections").await;
    assert_eq!(list["items"][0]["secret_fields"], *fields);
    for shown in [&updated, &one, &list] {
        assert!(!shown.to_string().contains("SECRET"), "{shown}");
    }
    let pool = app.db.pool().await;
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT secrets_ciphertext FROM channel_connections WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        !stored.windows(6).any(|w| w == b"SECRET"),
        "encrypted at rest, old value too"
    );

    // Audited: who, what changed and until when the old secret verifies; no value.
    let (actor, target, details): (Uuid, Uuid, Value) = sqlx::query_as(
        "SELECT actor_user_id, target_id, details FROM audit_log
         WHERE action = 'channel_connection.updated'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((actor, target), (admin.id, id));
    let mut changed: Vec<&str> = details["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    changed.sort_unstable();
    assert_eq!(
        changed,
        [
            "previous_secrets_expire_at",
            "secrets.bot_token",
            "secrets.signing_secret",
            "settings"
        ]
    );
    let logged: DateTime<Utc> = details["previous_secrets_expire_at"]["signing_secret"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(logged, expires);
    assert!(!details.to_string().contains("SECRET"), "{details}");
}

#[tokio::test]
async fn only_an_admin_of_the_connections_org_may_change_it() {
    let app = TestApp::builder().no_workers().build().await;
    let admin_a = app.member(None, Role::Admin).await;
    let admin_b = app.member(None, Role::Admin).await;
    let expert_a = app.member(Some(admin_a.org), Role::Expert).await;
    let pod = app.pod(0);
    let a = pod.as_user(&admin_a.token);
    let id = a.create_connection(admin_a.org, "slack").await;
    let path = format!("/channel-connections/{id}");
    let body = json!({"name": "taken-over", "secrets": {"bot_token": "xoxb-theirs"}});

    // Another org's admin: 403, as on the other connection routes (never a 404 that
    // tells them apart from nothing).
    let (status, error) = pod.as_user(&admin_b.token).patch(&path, body.clone()).await;
    assert_eq!((status, &error["code"]), (403, &json!("forbidden")));
    let (status, _) = pod
        .as_user(&expert_a.token)
        .patch(&path, body.clone())
        .await;
    assert_eq!(status, 403, "an expert of the org");
    let unknown = format!("/channel-connections/{}", Uuid::new_v4());
    assert_eq!(a.patch(&unknown, body.clone()).await.0, 404);
    let anonymous = pod
        .client
        .patch(pod.url(&path))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    let (_, shown) = a.get(&path).await;
    assert_eq!(shown["name"], "slack");
    assert_eq!(updates(&app.db).await, 0);
}

#[tokio::test]
async fn invalid_changes_are_refused_and_write_nothing() {
    let app = TestApp::builder().no_workers().build().await;
    let org = app.org().await;
    let pod = app.pod(0);
    let admin = pod.as_user(&org.token);
    // A second Slack connection, whose name the first cannot take.
    admin
        .create_connection_with(org.id, "slack", "other", signing::secrets("slack"))
        .await;
    let snapshot = "SELECT string_agg(concat_ws('|', id, name, settings, encode(secrets_ciphertext, 'hex'),
                    previous_secrets_expire_at, updated_at), ',' ORDER BY id) FROM channel_connections";
    let pool = app.db.pool().await;
    let rows = || async {
        let rows: String = sqlx::query_scalar(snapshot).fetch_one(&pool).await.unwrap();
        rows
    };
    let before = rows().await;

    let slack = connection_path(&org, "slack");
    let refused = [
        (&slack, json!({})),
        (&slack, json!({"secret": {"signing_secret": "x"}})),
        (&slack, json!({"name": " "})),
        (&slack, json!({"name": "x".repeat(201)})),
        (&slack, json!({"settings": [1]})),
        (&slack, json!({"secrets": "hunter2"})),
        (&slack, json!({"secrets": {}})),
        (&slack, json!({"secrets": {"api_key": "hunter2"}})),
        (&slack, json!({"secrets": {"bot_token": ""}})),
        (&slack, json!({"secrets": {"bot_token": 5}})),
        (
            &slack,
            json!({"name": "renamed", "secrets": {"bot_token": ""}}),
        ),
        (
            &slack,
            json!({"secrets": {"signing_secret": "n"}, "previous_secret_expires_in_secs": 2_592_001}),
        ),
        (&slack, json!({"previous_secret_expires_in_secs": -1})),
        (&slack, json!({"previous_secret_expires_in_secs": 60})),
        (
            &connection_path(&org, "telegram"),
            json!({"secrets": {"secret_token": "short"}}),
        ),
        (
            &connection_path(&org, "email"),
            json!({"secrets": {"webhook_secret": "not-whsec"}}),
        ),
    ];
    for (path, body) in refused {
        let (status, error) = admin.patch(path, body.clone()).await;
        assert_eq!(status, 422, "{body}: {error}");
        assert_eq!(error["code"], "validation_failed", "{body}");
        assert!(
            !error["message"].as_str().unwrap().contains("hunter2"),
            "{error}"
        );
    }
    let malformed = admin
        .request(reqwest::Method::PATCH, &slack)
        .header("content-type", "application/json")
        .body("{\"name\":")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    let (status, error) = admin.patch(&slack, json!({"name": "other"})).await;
    assert_eq!(status, 409, "{error}");

    assert_eq!(rows().await, before, "a refused change wrote nothing");
    assert_eq!(updates(&app.db).await, 0);
    let signed = signing::slack(SLACK_SECRET, "EvStill", "U1", "1700000000.000001", "hi");
    assert_eq!(
        checked(pod.send_webhook(&org.webhook("slack"), &signed).await),
        200
    );
}

#[tokio::test]
async fn every_channels_webhook_secret_rotates_with_an_overlap() {
    let app = TestApp::builder().no_workers().build().await;
    let org = app.org().await;
    let pod = app.pod(0);
    let admin = pod.as_user(&org.token);
    let whsec = "whsec_cm90YXRlZC1zaWduaW5nLWtleS0wMTIzNDU2Nzg5YWI=";
    let rotations = [
        ("slack", "signing_secret", NEW_SECRET),
        ("whatsapp", "auth_token", "twilio-token-rotated"),
        ("telegram", "secret_token", "tg-secret-rotated-0123"),
        ("email", "webhook_secret", whsec),
    ];
    for (channel, field, new) in rotations {
        let body = json!({"secrets": {field: new}});
        let (status, shown) = admin.patch(&connection_path(&org, channel), body).await;
        assert_eq!(status, 200, "{channel}: {shown}");
        let fields = shown["secret_fields"].as_array().unwrap();
        for f in fields {
            let overlapping = f["name"] == field;
            assert_eq!(f["verifies_webhooks"], overlapping, "{channel}: {f}");
            assert_eq!(
                f["previous_expires_at"].is_string(),
                overlapping,
                "{channel}: {f}"
            );
        }
    }

    let n = Cell::new(0);
    let signed = |channel: &str, secret: &str| {
        n.set(n.get() + 1);
        let i = n.get();
        match channel.parse::<ChannelKind>().expect("a channel") {
            ChannelKind::Slack => {
                signing::slack(secret, &format!("Ev{i}"), "U1", &format!("1.{i}"), "hi")
            }
            ChannelKind::Whatsapp => {
                let url = format!("https://switchboard.test{}", org.webhook("whatsapp"));
                let sid = format!("SM{i:032}");
                signing::whatsapp(secret, "AC123", &url, &sid, "whatsapp:+14155550100", "hi")
            }
            ChannelKind::Telegram => signing::telegram(secret, i64::from(i), 42, "hi"),
            ChannelKind::Email => signing::email(
                secret,
                &format!("msg_{i}"),
                &format!("<{i}@x>"),
                "a@b.c",
                "hi",
            ),
        }
    };
    let old = [SLACK_SECRET, WHATSAPP_TOKEN, TELEGRAM_SECRET, WHSEC];
    let guesses = [
        "guess",
        "guess",
        "tg-secret-guessed-0123",
        "whsec_Z3Vlc3NlZC1rZXk=",
    ];
    for (((channel, _, new), old), guess) in rotations.into_iter().zip(old).zip(guesses) {
        let path = org.webhook(channel);
        assert_eq!(
            checked(pod.send_webhook(&path, &signed(channel, old)).await),
            200,
            "{channel} old"
        );
        assert_eq!(
            checked(pod.send_webhook(&path, &signed(channel, new)).await),
            200,
            "{channel} new"
        );
        assert_eq!(
            checked(pod.send_webhook(&path, &signed(channel, guess)).await),
            401,
            "{channel} guess"
        );
    }
}
