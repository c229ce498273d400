//! Alert routing: one incident per kind and scope across pods, each sink (Slack,
//! PagerDuty, a signed webhook) hears its trigger and resolve once, severities route,
//! failed deliveries are retried, the queue alert opens and resolves on the inbox's
//! figures, a dead reply emails the org's account manager once, and `GET /alerts` shows
//! it all to admins only.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_channels::alert_sinks::standard_webhooks_signature;
use switchboard_domain::Role;
use switchboard_domain::alerts::AlertKind;
use switchboard_testing::{
    Call, Provider, TestApp, TestDb, eventually, seed_item, signing, wait_outbox,
};
use wiremock::ResponseTemplate;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Pod settings that send every sink to `sinks`, under `/slackhook`, `/pagerduty` and
/// `/hook`.
fn sink_env(sinks: &Provider) -> Vec<(String, String)> {
    let base = sinks.server.uri();
    [
        ("ALERT_SLACK_WEBHOOK_URL", format!("{base}/slackhook/T1/B1")),
        (
            "ALERT_PAGERDUTY_URL",
            format!("{base}/pagerduty/v2/enqueue"),
        ),
        ("ALERT_PAGERDUTY_ROUTING_KEY", "R0UT1NGKEY".to_owned()),
        ("ALERT_WEBHOOK_URL", format!("{base}/hook/alerts")),
        ("ALERT_WEBHOOK_SECRET", SECRET.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Waits until `sinks` got exactly `n` calls under `prefix`, and returns them.
async fn calls(sinks: &Provider, prefix: &str, n: usize) -> Vec<Call> {
    eventually(
        &format!("{n} calls to {prefix}"),
        Duration::from_secs(15),
        || async {
            let calls = sinks.calls(prefix);
            (calls.len() >= n).then_some(calls)
        },
    )
    .await
}

fn signed_right(call: &Call) -> bool {
    let body = String::from_utf8_lossy(&call.body);
    let timestamp: i64 = call.header("webhook-timestamp").parse().unwrap_or(0);
    standard_webhooks_signature(SECRET, call.header("webhook-id"), timestamp, &body).as_deref()
        == Some(call.header("webhook-signature"))
}

#[tokio::test]
async fn two_pods_raising_one_condition_open_one_incident_and_every_sink_hears_it_once() {
    let sinks = Provider::start().await;
    let app = TestApp::builder()
        .pods(2)
        .envs(sink_env(&sinks))
        .build()
        .await;
    let (a, b) = (app.pod(0), app.pod(1));
    let (alerts_a, alerts_b) = (
        a.server.state().alerts.clone(),
        b.server.state().alerts.clone(),
    );
    let raise = |alerts: switchboard_jobs::alerts::Alerts| async move {
        alerts
            .raise(
                AlertKind::AgentFailing,
                "agent",
                "the agent failed 6 health probes in a row",
                json!({"failures": 6}),
            )
            .await
    };
    let (first, second) = tokio::join!(raise(alerts_a.clone()), raise(alerts_b.clone()));
    assert!(first ^ second, "exactly one pod opens the incident");

    let slack = calls(&sinks, "slackhook", 1).await;
    let pagerduty = calls(&sinks, "pagerduty", 1).await;
    let hook = calls(&sinks, "hook", 1).await;
    let trigger = pagerduty[0].json();
    assert_eq!(trigger["event_action"], "trigger");
    assert_eq!(trigger["routing_key"], "R0UT1NGKEY");
    assert_eq!(trigger["payload"]["severity"], "critical");
    assert!(
        slack[0].json()["text"]
            .as_str()
            .is_some_and(|t| t.contains("agent_failing"))
    );
    assert!(
        signed_right(&hook[0]),
        "the webhook is signed the Standard Webhooks way"
    );
    assert_eq!(hook[0].json()["type"], "alert.trigger");

    // Seen again while open: no second incident, nothing sent.
    assert!(!raise(alerts_a.clone()).await);

    alerts_b.resolve(AlertKind::AgentFailing, "agent").await;
    alerts_a.resolve(AlertKind::AgentFailing, "agent").await;
    let pagerduty = calls(&sinks, "pagerduty", 2).await;
    let resolve = pagerduty[1].json();
    assert_eq!(resolve["event_action"], "resolve");
    assert_eq!(
        resolve["dedup_key"], trigger["dedup_key"],
        "one dedup_key per incident"
    );
    let hook = calls(&sinks, "hook", 2).await;
    assert_eq!(hook[1].json()["type"], "alert.resolve");
    assert!(signed_right(&hook[1]));
    calls(&sinks, "slackhook", 2).await;

    let admin = app.member(None, Role::Admin).await;
    let listed = eventually("every delivery sent", Duration::from_secs(10), || async {
        let (status, body) = a.as_user(&admin.token).get("/alerts").await;
        assert_eq!(status, 200, "{body}");
        let sent = body["alerts"][0]["deliveries"]
            .as_array()
            .is_some_and(|d| d.len() == 6 && d.iter().all(|d| d["status"] == "sent"));
        sent.then_some(body)
    })
    .await;
    let alerts = listed["alerts"].as_array().expect("alerts");
    assert_eq!(alerts.len(), 1, "{listed}");
    assert_eq!(alerts[0]["kind"], "agent_failing");
    assert_eq!(alerts[0]["status"], "resolved");
    assert_eq!(sinks.calls("pagerduty").len(), 2, "nothing more was sent");
    assert_eq!(sinks.calls("slackhook").len(), 2);
    assert_eq!(sinks.calls("hook").len(), 2);
}

#[tokio::test]
async fn sinks_take_the_severities_they_ask_for_and_a_failed_delivery_is_retried() {
    let sinks = Provider::start().await;
    let app = TestApp::builder()
        .envs(sink_env(&sinks))
        .env("ALERT_SLACK_MIN_SEVERITY", "critical")
        .build()
        .await;
    let pod = app.pod(0);
    sinks.script(vec![ResponseTemplate::new(503)]);
    let alerts = pod.server.state().alerts.clone();
    // `scheduled_run_failed` is a warning: the webhook (info and up) gets it, Slack
    // (critical here) and PagerDuty (critical by default) do not.
    assert!(
        alerts
            .raise(
                AlertKind::ScheduledRunFailed,
                "reports",
                "scheduled run failed",
                json!({})
            )
            .await
    );
    let hook = calls(&sinks, "hook", 2).await;
    assert_eq!(
        hook[0].header("webhook-id"),
        hook[1].header("webhook-id"),
        "a retry is the same message"
    );
    let admin = app.member(None, Role::Admin).await;
    let (_, body) = pod.as_user(&admin.token).get("/alerts?status=open").await;
    let deliveries = &body["alerts"][0]["deliveries"];
    assert_eq!(deliveries.as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(deliveries[0]["sink"], "webhook");
    assert_eq!(deliveries[0]["attempts"], 2);
    assert!(sinks.calls("slackhook").is_empty() && sinks.calls("pagerduty").is_empty());
}

#[tokio::test]
async fn only_admins_list_alerts_and_a_bad_query_is_refused() {
    let app = TestApp::builder().build().await;
    let pod = app.pod(0);
    let org = app.org().await;
    let expert = app.member(Some(org.id), Role::Expert).await;
    assert_eq!(pod.as_user(&expert.token).get("/alerts").await.0, 403);
    assert_eq!(pod.status("/alerts").await, 401);
    let admin = pod.as_user(&org.token);
    assert_eq!(admin.get("/alerts?status=closed").await.0, 422);
    assert_eq!(admin.get("/alerts?bogus=1").await.0, 422);
    let (status, body) = admin.get("/alerts").await;
    assert_eq!((status, &body["alerts"]), (200, &json!([])));
}

/// The details of the `queue_backlog` incident in `status`, if there is one.
async fn queue_backlog(db: &TestDb, status: &str) -> Option<Value> {
    let pool = db.pool().await;
    let row: Option<Value> = sqlx::query_scalar(
        "SELECT details FROM alert_incidents WHERE kind = 'queue_backlog' AND status = $1",
    )
    .bind(status)
    .fetch_optional(&pool)
    .await
    .expect("incident");
    pool.close().await;
    row
}

#[tokio::test]
async fn the_queue_alert_opens_on_a_backlog_and_resolves_when_it_drains() {
    let app = TestApp::builder()
        .no_workers()
        .env("ALERT_QUEUE_WAITING", "2")
        .env("SCHEDULE_QUEUE_ALERT", "@every 1s")
        .build()
        .await;
    let (pod, db) = (app.pod(0), &app.db);
    let org = app.org().await;
    let hook = org.webhook("slack");
    for i in 0..3 {
        let signed = signing::slack_message("U1", &format!("1700000000.00010{i}"), "hello");
        assert_eq!(pod.send_webhook(&hook, &signed).await.0, 200);
    }
    let incident = |status: &'static str| queue_backlog(&app.db, status);
    let details = eventually("an open queue_backlog", Duration::from_secs(15), || {
        incident("open")
    })
    .await;
    assert_eq!(details["waiting"], 3, "{details}");
    let pool = db.pool().await;
    sqlx::query("UPDATE inbound_events SET processed_at = now()")
        .execute(&pool)
        .await
        .expect("drained");
    pool.close().await;
    eventually(
        "the queue_backlog resolved",
        Duration::from_secs(15),
        || incident("resolved"),
    )
    .await;
}

#[tokio::test]
async fn a_fast_growing_backlog_opens_the_queue_alert_before_it_reaches_the_threshold() {
    let app = TestApp::builder()
        .no_workers()
        .env("ALERT_QUEUE_WAITING", "1000")
        .env("SCHEDULE_QUEUE_ALERT", "@every 1s")
        .build()
        .await;
    let pod = app.pod(0);
    let org = app.org().await;
    let hook = org.webhook("slack");
    let incident = |status: &'static str| queue_backlog(&app.db, status);
    // About 50 webhooks a second: at that growth 1 000 are a minute away, while fewer
    // than 1 000 wait.
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut sent = 0;
    let details = loop {
        tick.tick().await;
        let signed = signing::slack_message("U1", &format!("1700000000.{sent:06}"), "hello");
        assert_eq!(pod.send_webhook(&hook, &signed).await.0, 200);
        sent += 1;
        if sent % 25 == 0 {
            if let Some(details) = incident("open").await {
                break details;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no queue_backlog while the backlog grew to {sent}"
        );
    };
    let waiting = details["waiting"].as_i64().expect("waiting");
    assert!(waiting < 1000, "opened early: {details}");
    assert!(
        details["growth_per_second"].as_i64().expect("growth") > 0,
        "{details}"
    );
    // The growth stops; with fewer than the threshold waiting, the incident resolves.
    eventually(
        "the queue_backlog resolved",
        Duration::from_secs(15),
        || incident("resolved"),
    )
    .await;
}

#[tokio::test]
async fn a_dead_reply_emails_the_account_manager_once_and_an_admin_retry_resolves_it() {
    let app = TestApp::builder()
        .pods(2)
        .fake_provider()
        .env("DEAD_LETTER_INTERVAL_MS", "200")
        .env("DEAD_LETTER_BACKOFF_MS", "50")
        .env("MAIL_FROM", "Switchboard <alerts@example.com>")
        .env("MAIL_RESEND_API_KEY", "re_test_key")
        .build()
        .await;
    let (a, db, provider) = (app.pod(0), &app.db, app.provider());
    let org = app.org().await;
    let settings = format!("/orgs/{}/settings", org.id);
    let patch = |body: Value| {
        a.as_user(&org.token)
            .request(reqwest::Method::PATCH, &settings)
            .json(&body)
            .send()
    };
    let refused = patch(json!({"account_manager_email": "not an address"}))
        .await
        .expect("patch");
    assert_eq!(refused.status(), 422);
    let set = patch(json!({"account_manager_email": "am@example.com"}))
        .await
        .expect("patch");
    assert_eq!(set.status(), 200);
    let body: Value = set.json().await.expect("json");
    assert_eq!(body["account_manager_email"], "am@example.com");
    assert_eq!(body["time_zone"], "UTC", "an absent field stays as it was");

    let reply_to = json!({"channel": "C1", "thread_ts": "1700000000.000100"});
    let item = seed_item(db, org.id, "slack", org.conns["slack"], reply_to).await;
    provider.always(Some(ResponseTemplate::new(500)));
    let outbox = a.as_user(&org.token).release_ok(item, None).await;
    wait_outbox(db, outbox, "dead").await;

    let mails = eventually(
        "the account manager's notice",
        Duration::from_secs(15),
        || async {
            let mails: Vec<Call> = provider
                .calls("resend")
                .into_iter()
                .filter(|c| c.json()["to"].to_string().contains("am@example.com"))
                .collect();
            (!mails.is_empty()).then_some(mails)
        },
    )
    .await;
    let pool = db.pool().await;
    let failure: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM channel_failures WHERE outbox_id = $1")
            .bind(outbox)
            .fetch_one(&pool)
            .await
            .expect("dead letter");
    pool.close().await;
    let mail = mails[0].json();
    assert!(
        mail["text"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("#/admin/dead-letters/{failure}"))),
        "{mail}"
    );
    // Both pods' dead-letter slots run again; still one notice.
    db.wait_for_job_runs("dead-letters", 4).await;
    let notices = provider
        .calls("resend")
        .iter()
        .filter(|c| c.json()["to"].to_string().contains("am@example.com"))
        .count();
    assert_eq!(notices, 1, "one notice per dead reply");

    provider.always(None);
    let (status, _) = a
        .as_user(&org.token)
        .post(&format!("/dead-letters/{failure}/retry"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (_, listed) = a.as_user(&org.token).get("/alerts").await;
    let reply_dead = listed["alerts"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["kind"] == "reply_dead").cloned())
        .expect("the reply_dead incident");
    assert_eq!(reply_dead["status"], "resolved", "{listed}");
    assert_eq!(reply_dead["org_id"], json!(org.id));
}
