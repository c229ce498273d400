//! System mail over SMTP, end to end: the mailer as the configuration builds it, against
//! a fake server that speaks enough SMTP for lettre (`switchboard_testing::FakeSmtp`).
//! Resend's side is tested in `switchboard_channels::system_mail` with wiremock.

use std::collections::HashMap;
use switchboard_channels::system_mail::{Mail, MailError, Mailer, Via};
use switchboard_testing::fake_smtp::Stage;
use switchboard_testing::{FakeSmtp, JWT_SECRET, config_from};

/// The mailer a pod would build with `MAIL_SMTP_URL=url`.
fn mailer(url: &str) -> Mailer {
    let vars: HashMap<String, String> = [
        ("APP_ENV", "test"),
        ("DATABASE_URL", "postgres://localhost/unused"),
        ("JWT_SECRET", JWT_SECRET),
        ("MAIL_FROM", "Switchboard <ops@switchboard.test>"),
        ("MAIL_SMTP_URL", url),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let mailer = Mailer::from_config(&config_from(&vars)).expect("mailer");
    assert_eq!(mailer.via(), Some(Via::Smtp));
    mailer
}

fn alert() -> Mail {
    Mail {
        to: "On call <oncall@example.com>".into(),
        subject: "Queue backlog".into(),
        text: "1200 events waiting".into(),
        html: Some("<p>1200 events <b>waiting</b></p>".into()),
    }
}

#[tokio::test]
async fn mail_over_smtp_reaches_the_server_with_its_login() {
    let fake = FakeSmtp::with_login("alerts@switchboard.test", "pa:ss").await;
    let sent = mailer(&fake.url("alerts%40switchboard.test:pa%3Ass@"))
        .send(&alert())
        .await
        .expect("sent");
    assert_eq!(
        sent.provider_id.as_deref(),
        Some("2.0.0 Ok: queued as FAKE1")
    );
    let [got] = fake.messages().try_into().expect("one message");
    assert_eq!(got.login.as_deref(), Some("alerts@switchboard.test"));
    assert_eq!(got.from, "ops@switchboard.test");
    assert_eq!(got.to, ["oncall@example.com"]);
    for part in [
        "From: Switchboard <ops@switchboard.test>",
        "To: \"On call\" <oncall@example.com>",
        "Subject: Queue backlog",
        "multipart/alternative",
        "1200 events waiting",
        "<p>1200 events <b>waiting</b></p>",
    ] {
        assert!(got.data.contains(part), "{part} in\n{}", got.data);
    }
}

#[tokio::test]
async fn mail_a_451_is_retryable_and_a_550_is_not() {
    let fake = FakeSmtp::start().await;
    let mailer = mailer(&fake.url(""));
    fake.reply(Stage::Data, 451, "4.3.0 Try again later");
    let err = mailer.send(&alert()).await.expect_err("deferred");
    assert!(err.is_retryable(), "{err:?}");
    assert!(
        matches!(&err, MailError::Deferred { via: Via::Smtp, code: 451, detail, .. }
            if detail.contains("Try again later")),
        "{err:?}"
    );
    fake.reply(Stage::RcptTo, 550, "5.1.1 No such user");
    let err = mailer.send(&alert()).await.expect_err("refused");
    assert!(!err.is_retryable(), "{err:?}");
    assert!(
        matches!(&err, MailError::Refused { via: Via::Smtp, code: 550, detail }
            if detail.contains("No such user")),
        "{err:?}"
    );
    assert!(fake.messages().is_empty());
}

#[tokio::test]
async fn mail_with_a_wrong_password_is_refused_for_good() {
    let fake = FakeSmtp::with_login("alerts", "right").await;
    let err = mailer(&fake.url("alerts:wrong@"))
        .send(&alert())
        .await
        .expect_err("refused");
    assert!(
        matches!(err, MailError::Refused { code: 535, .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable() && fake.messages().is_empty());
}

#[tokio::test]
async fn mail_sends_nothing_when_starttls_is_asked_for_and_not_offered() {
    let fake = FakeSmtp::start().await;
    // `smtp://` without `tls=off` is STARTTLS, which the fake never offers.
    let url = fake.url("").replace("?tls=off", "");
    let err = mailer(&url).send(&alert()).await.expect_err("no tls");
    assert!(
        matches!(err, MailError::Protocol { via: Via::Smtp, .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable() && fake.messages().is_empty());
}

#[tokio::test]
async fn mail_to_a_server_that_is_not_there_is_retryable() {
    let port = switchboard_testing::free_port();
    let err = mailer(&format!("smtp://127.0.0.1:{port}?tls=off"))
        .send(&alert())
        .await
        .expect_err("unreachable");
    assert!(
        matches!(err, MailError::Unreachable { via: Via::Smtp, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
}
