//! Each channel's exact provider request, end to end (signed webhook → draft → release →
//! provider): the first reply, a reply to a later (threaded) message, and a long text split
//! into parts.

use base64::Engine;
use serde_json::json;
use switchboard_testing::signing::{
    self, SLACK_SECRET, Signed, TELEGRAM_SECRET, WHATSAPP_TOKEN, WHSEC,
};
use switchboard_testing::{Call, Org, TestApp, delivery, wait_outbox};
use uuid::Uuid;

struct Run {
    app: TestApp,
    org: Org,
}

impl Run {
    async fn start() -> Run {
        let app = TestApp::builder().fakes().build().await;
        let org = app.org().await;
        Run { app, org }
    }

    /// The customer's `n`th message arrives on `channel` and gets its draft.
    async fn customer_writes(&self, channel: &str, signed: &Signed, n: i64) {
        let path = self.org.webhook(channel);
        let (status, body) = self.app.pod(0).send_webhook(&path, signed).await;
        assert_eq!(status, 200, "{body}");
        let drafts = "SELECT count(*) FROM drafts";
        assert_eq!(self.app.db.wait_for_count(drafts, n).await, n);
    }

    /// Releases the pending item with `body`; returns the provider calls it caused.
    async fn release(&self, prefix: &str, body: &str) -> (Uuid, Vec<Call>) {
        let (db, provider) = (&self.app.db, self.app.provider());
        let pool = db.pool().await;
        let item: Uuid = sqlx::query_scalar("SELECT id FROM expert_queue WHERE status = 'pending'")
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        let before = provider.calls(prefix).len();
        let user = self.app.pod(0).as_user(&self.org.token);
        let outbox = user.release_ok(item, Some(body)).await;
        let sent = wait_outbox(db, outbox, "sent").await;
        let calls = provider.calls(prefix).split_off(before);
        assert_eq!(sent.parts.as_array().unwrap().len(), calls.len());
        assert_eq!(sent.delivery_status.as_deref(), Some("sent"));
        assert!(sent.delivered && sent.provider_message_id.is_some());
        (outbox, calls)
    }
}

/// 700 words, 5 599 characters: two Telegram parts, four WhatsApp parts.
fn long_text() -> String {
    (0..700)
        .map(|i| format!("word{i:03}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn assert_split(texts: &[String], max: usize, parts: usize) {
    assert_eq!(texts.len(), parts);
    assert!(texts.iter().all(|t| t.chars().count() <= max));
    assert_eq!(texts.join(" "), long_text(), "parts are the text, in order");
}

#[tokio::test]
async fn slack_replies_in_the_customers_thread() {
    let run = Run::start().await;
    let first = signing::slack(SLACK_SECRET, "Ev1", "U1", "1700000001.000100", "hi");
    run.customer_writes("slack", &first, 1).await;
    let (_, calls) = run.release("slack", "reply 1").await;
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        (call.method.as_str(), call.path.as_str()),
        ("POST", "/chat.postMessage")
    );
    assert_eq!(call.header("authorization"), "Bearer xoxb-1");
    assert!(call.header("content-type").starts_with("application/json"));
    let expected = json!({"channel": "C1", "text": "reply 1", "thread_ts": "1700000001.000100"});
    assert_eq!(
        call.json(),
        expected,
        "a first reply starts a thread on the message"
    );

    // The customer writes inside another thread: the answer goes into that thread.
    let body = json!({"type": "event_callback", "event_id": "Ev2", "team_id": "T1",
        "event": {"type": "message", "user": "U1", "text": "and?", "ts": "1700000002.000200",
                  "thread_ts": "1700000000.000001", "channel": "C1"}});
    let now = chrono::Utc::now().timestamp();
    let threaded = signing::slack_raw(SLACK_SECRET, now, body.to_string().into_bytes());
    run.customer_writes("slack", &threaded, 2).await;
    let (_, calls) = run.release("slack", "reply 2").await;
    let expected = json!({"channel": "C1", "text": "reply 2", "thread_ts": "1700000000.000001"});
    assert_eq!(calls[0].json(), expected);

    // Slack splits long posts itself: one call with the whole text.
    let third = signing::slack(SLACK_SECRET, "Ev3", "U1", "1700000003.000300", "more");
    run.customer_writes("slack", &third, 3).await;
    let (_, calls) = run.release("slack", &long_text()).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].json()["text"], long_text());
}

#[tokio::test]
async fn whatsapp_replies_through_the_twilio_messages_api() {
    let run = Run::start().await;
    let url = format!(
        "https://switchboard.test/webhooks/whatsapp/{}",
        run.org.conns["whatsapp"]
    );
    let customer = "whatsapp:+14155550100";
    let msg = |sid: &str| signing::whatsapp(WHATSAPP_TOKEN, "AC123", &url, sid, customer, "hi");
    run.customer_writes("whatsapp", &msg("SM1"), 1).await;
    let (_, calls) = run.release("twilio", "reply 1").await;
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.method, "POST");
    assert_eq!(call.path, "/2010-04-01/Accounts/AC123/Messages.json");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("AC123:{WHATSAPP_TOKEN}"));
    assert_eq!(call.header("authorization"), format!("Basic {basic}"));
    assert_eq!(
        call.header("content-type"),
        "application/x-www-form-urlencoded"
    );
    let form = call.form();
    assert_eq!(form["From"], "whatsapp:+15550000000");
    assert_eq!(form["To"], customer);
    assert_eq!(form["Body"], "reply 1");
    assert_eq!(form.len(), 3);

    run.customer_writes("whatsapp", &msg("SM2"), 2).await;
    let (_, calls) = run.release("twilio", "reply 2").await;
    assert_eq!(
        (
            calls[0].form()["To"].as_str(),
            calls[0].form()["Body"].as_str()
        ),
        (customer, "reply 2")
    );

    run.customer_writes("whatsapp", &msg("SM3"), 3).await;
    let (outbox, calls) = run.release("twilio", &long_text()).await;
    let texts: Vec<String> = calls.iter().map(|c| c.form()["Body"].clone()).collect();
    assert_split(&texts, 1600, 4);
    let ids = delivery(&run.app.db, outbox).await.parts;
    assert_eq!(
        ids.as_array().unwrap().len(),
        4,
        "every part's sid is recorded: {ids}"
    );
}

#[tokio::test]
async fn telegram_replies_quote_the_customers_message() {
    let run = Run::start().await;
    run.customer_writes(
        "telegram",
        &signing::telegram(TELEGRAM_SECRET, 11, 555, "hi"),
        1,
    )
    .await;
    let (_, calls) = run.release("telegram", "reply 1").await;
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        (call.method.as_str(), call.path.as_str()),
        ("POST", "/bot1:abc/sendMessage")
    );
    assert!(call.header("content-type").starts_with("application/json"));
    let quote = |id: i64| json!({"message_id": id, "allow_sending_without_reply": true});
    let expected = json!({"chat_id": 555, "text": "reply 1", "reply_parameters": quote(11)});
    assert_eq!(call.json(), expected);

    run.customer_writes(
        "telegram",
        &signing::telegram(TELEGRAM_SECRET, 12, 555, "and?"),
        2,
    )
    .await;
    let (_, calls) = run.release("telegram", "reply 2").await;
    assert_eq!(
        calls[0].json()["reply_parameters"],
        quote(12),
        "quotes the latest message"
    );

    run.customer_writes(
        "telegram",
        &signing::telegram(TELEGRAM_SECRET, 13, 555, "more"),
        3,
    )
    .await;
    let (_, calls) = run.release("telegram", &long_text()).await;
    let bodies: Vec<_> = calls.iter().map(Call::json).collect();
    let texts: Vec<String> = bodies
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_owned())
        .collect();
    assert_split(&texts, 4096, 2);
    assert_eq!(bodies[0]["reply_parameters"], quote(13));
    assert!(
        bodies[1].get("reply_parameters").is_none(),
        "only part 1 quotes"
    );
}

#[tokio::test]
async fn email_replies_thread_in_the_customers_mail_client() {
    let run = Run::start().await;
    let mail =
        |id: &str, msg: &str| signing::email(WHSEC, id, msg, "Ann <ann@customer.test>", "hi");
    run.customer_writes("email", &mail("wh1", "<m1@customer.test>"), 1)
        .await;
    let (outbox, calls) = run.release("resend", "reply 1").await;
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        (call.method.as_str(), call.path.as_str()),
        ("POST", "/emails")
    );
    assert_eq!(call.header("authorization"), "Bearer re_1");
    assert_eq!(call.header("idempotency-key"), outbox.to_string());
    let threading = |id: &str| json!({"In-Reply-To": id, "References": id});
    let expected = json!({"from": "support@example.test", "to": ["ann@customer.test"],
        "subject": "Re: Help", "text": "reply 1", "headers": threading("<m1@customer.test>")});
    assert_eq!(call.json(), expected);

    run.customer_writes("email", &mail("wh2", "<m2@customer.test>"), 2)
        .await;
    let (outbox, calls) = run.release("resend", "reply 2").await;
    assert_eq!(calls[0].json()["headers"], threading("<m2@customer.test>"));
    assert_eq!(calls[0].header("idempotency-key"), outbox.to_string());

    run.customer_writes("email", &mail("wh3", "<m3@customer.test>"), 3)
        .await;
    let (_, calls) = run.release("resend", &long_text()).await;
    assert_eq!(calls.len(), 1, "an email is never split");
    assert_eq!(calls[0].json()["text"], long_text());
}
