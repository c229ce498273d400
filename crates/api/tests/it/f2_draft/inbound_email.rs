//! Email through Resend: a `email.received` webhook carries metadata only, so the job
//! fetches the body (text, else HTML made text, else a note saying why), once per event.

use serde_json::{Value, json};
use switchboard_testing::TestApp;
use switchboard_testing::signing::{self, WHSEC};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A Resend `email.received` webhook as Resend sends it: metadata, no body.
fn email_without_body(email_id: &str) -> signing::Signed {
    let body = serde_json::to_vec(&json!({
        "type": "email.received", "created_at": "2026-11-29T10:00:00Z",
        "data": {"email_id": email_id, "from": "Ann Lee <ann@example.test>",
                 "to": ["support@example.test"], "subject": "Parcel",
                 "message_id": format!("<{email_id}@mail.example.test>"), "attachments": []}
    }))
    .unwrap();
    signing::standard_webhook(WHSEC, email_id, chrono::Utc::now().timestamp(), body)
}

#[tokio::test]
async fn an_email_webhook_without_its_body_gets_it_from_resend() {
    let resend = MockServer::start().await;
    let answer = |json: Value| ResponseTemplate::new(200).set_body_json(json);
    for (id, response) in [
        (
            "em_text",
            answer(
                json!({"object": "email", "id": "em_text", "text": "My parcel never arrived", "html": "<p>ignored</p>"}),
            ),
        ),
        (
            "em_html",
            answer(
                json!({"object": "email", "id": "em_html", "text": null, "html": "<p>Hello</p><p>from HTML</p>"}),
            ),
        ),
        (
            "em_gone",
            ResponseTemplate::new(404).set_body_json(json!({"name": "not_found"})),
        ),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("/emails/receiving/{id}")))
            .and(header("authorization", "Bearer re_1"))
            .respond_with(response)
            .mount(&resend)
            .await;
    }
    // Resend busy once: the event stays unprocessed and the sweeper runs it again.
    Mock::given(method("GET"))
        .and(path("/emails/receiving/em_busy"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&resend)
        .await;
    Mock::given(method("GET"))
        .and(path("/emails/receiving/em_busy"))
        .respond_with(answer(json!({"id": "em_busy", "text": "second try"})))
        .with_priority(2)
        .mount(&resend)
        .await;
    let app = TestApp::builder()
        .fake_agent()
        .env("RESEND_API_BASE", &resend.uri())
        // The busy one is tried again a second later, not after the default 30 s.
        .env("INBOX_RETRY_BASE_SECS", "1")
        .build()
        .await;
    let (p, db) = (app.pod(0), &app.db);
    let url = app.org().await.webhook("email");
    for id in ["em_text", "em_html", "em_gone", "em_busy"] {
        assert_eq!(
            p.send_webhook(&url, &email_without_body(id)).await.0,
            200,
            "{id}"
        );
    }
    // One that carries its text is never fetched.
    let with_text = signing::email(
        WHSEC,
        "em_inline",
        "<inline@mail.example.test>",
        "bo@example.test",
        "inline text",
    );
    assert_eq!(p.send_webhook(&url, &with_text).await.0, 200);

    assert_eq!(
        db.wait_for_count(
            "SELECT count(*) FROM inbound_events WHERE processed_at IS NOT NULL",
            5
        )
        .await,
        5
    );
    let pool = db.pool().await;
    let body = |id: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT body FROM messages WHERE channel_message_id LIKE '%:' || $1",
            )
            .bind(format!("<{id}@mail.example.test>"))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(body("em_text").await, "My parcel never arrived");
    let html = body("em_html").await;
    assert!(
        html.contains("Hello") && html.contains("from HTML") && !html.contains('<'),
        "{html}"
    );
    let gone = body("em_gone").await;
    assert!(
        gone.starts_with("(The body of this email could not be retrieved") && gone.contains("404"),
        "{gone}"
    );
    assert_eq!(body("em_busy").await, "second try");
    assert_eq!(body("inline").await, "inline text");
    assert_eq!(db.count("SELECT count(*) FROM drafts").await, 5);
    let fetched: Vec<String> = resend
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect();
    assert_eq!(
        fetched.len(),
        5,
        "one fetch each, two for em_busy: {fetched:?}"
    );
    assert!(!fetched.iter().any(|p| p.contains("em_inline")));
}
