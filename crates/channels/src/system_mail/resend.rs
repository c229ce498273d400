//! System mail through Resend's `POST /emails`: the request the email channel makes
//! (`email::outbound`), with the service's own key and sender, read with the same cap and
//! classified by the same statuses as every provider call.

use std::time::Duration;

use reqwest::Client;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use url::Url;

use super::{BuildError, Mail, MailError, SentMail, Via};
use crate::outbound::{PROVIDER_ANSWER_CAP, read_capped, retry_after, retryable_status};

pub(super) struct Resend {
    client: Client,
    emails: Url,
    api_key: SecretString,
}

impl Resend {
    /// Redirects are not followed, as with every provider: a send is never redirected, and
    /// following one would replay the key somewhere nobody configured.
    pub(super) fn new(
        base: &Url,
        api_key: SecretString,
        timeout: Duration,
    ) -> Result<Self, BuildError> {
        let mut emails = base.clone();
        emails
            .path_segments_mut()
            .map_err(|()| BuildError::ResendBase)?
            .pop_if_empty()
            .push("emails");
        crate::install_tls_provider();
        let client = Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(BuildError::Client)?;
        Ok(Self {
            client,
            emails,
            api_key,
        })
    }

    /// Any 2xx is taken, even one whose body cannot be read: sending again would deliver the
    /// mail twice.
    pub(super) async fn send(
        &self,
        from: &str,
        to: &str,
        subject: &str,
        mail: &Mail,
    ) -> Result<SentMail, MailError> {
        let mut body = json!({"from": from, "to": [to], "subject": subject, "text": mail.text});
        if let Some(html) = &mail.html {
            body["html"] = json!(html);
        }
        let response = self
            .client
            .post(self.emails.clone())
            .bearer_auth(self.api_key.expose_secret())
            .json(&body)
            .send()
            .await
            .map_err(|e| MailError::Unreachable {
                via: Via::Resend,
                source: Box::new(e.without_url()),
            })?;
        let code = response.status().as_u16();
        let after = retry_after(response.headers());
        let answer = read_capped(response, PROVIDER_ANSWER_CAP).await;
        let json: Value = answer
            .as_deref()
            .ok()
            .and_then(|bytes| serde_json::from_slice(bytes).ok())
            .unwrap_or(Value::Null);
        if (200..300).contains(&code) {
            let id = json["id"].as_str().filter(|id| !id.is_empty());
            return Ok(SentMail {
                provider_id: id.map(str::to_owned),
            });
        }
        let detail = match (json["message"].as_str(), json["name"].as_str()) {
            (Some(message), Some(name)) => format!("{message} ({name})"),
            (Some(message), None) => message.to_owned(),
            (None, Some(name)) => name.to_owned(),
            (None, None) => match &answer {
                Ok(bytes) => String::from_utf8_lossy(bytes).chars().take(200).collect(),
                Err(e) => format!("({e})"),
            },
        };
        Err(if retryable_status(code) {
            MailError::Deferred {
                via: Via::Resend,
                code,
                detail,
                retry_after: after,
            }
        } else {
            MailError::Refused {
                via: Via::Resend,
                code,
                detail,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Mail, MailError, Mailer, Via};
    use secrecy::SecretString;
    use serde_json::json;
    use std::time::Duration;
    use switchboard_config::{MailTransport, SystemMail};
    use url::Url;
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// A mailer sending through Resend at `base`.
    fn mailer(base: &str) -> Mailer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mail = SystemMail {
            from: "Switchboard <ops@switchboard.test>".into(),
            transport: MailTransport::Resend {
                api_key: SecretString::from("re_system_key"),
            },
        };
        let base = Url::parse(base).expect("base");
        Mailer::new(mail, &base, Duration::from_millis(500)).expect("mailer")
    }

    fn alert(html: Option<&str>) -> Mail {
        Mail {
            to: "oncall@example.com".into(),
            subject: "Queue backlog\r\nBcc: everyone@example.com".into(),
            text: "1200 events waiting".into(),
            html: html.map(str::to_owned),
        }
    }

    /// A fake Resend answering every send with `reply`.
    async fn resend(reply: ResponseTemplate) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/emails"))
            .respond_with(reply)
            .mount(&server)
            .await;
        server
    }

    fn error(status: u16, name: &str, message: &str) -> ResponseTemplate {
        ResponseTemplate::new(status)
            .set_body_json(json!({"statusCode": status, "name": name, "message": message}))
    }

    async fn failure(reply: ResponseTemplate) -> MailError {
        let server = resend(reply).await;
        mailer(&server.uri())
            .send(&alert(None))
            .await
            .expect_err("fails")
    }

    #[tokio::test]
    async fn mail_through_resend_is_one_post_with_the_system_key() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/emails"))
            .and(header("authorization", "Bearer re_system_key"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "em_1"})))
            .expect(1)
            .mount(&server)
            .await;
        let sent = mailer(&format!("{}/api/", server.uri()))
            .send(&alert(Some("<p>1200 events waiting</p>")))
            .await
            .expect("sent");
        assert_eq!(sent.provider_id.as_deref(), Some("em_1"));
        let got = server.received_requests().await.expect("recorded");
        let body: serde_json::Value = got[0].body_json().expect("json");
        let want = json!({
            "from": "Switchboard <ops@switchboard.test>",
            "to": ["oncall@example.com"],
            "subject": "Queue backlog  Bcc: everyone@example.com",
            "text": "1200 events waiting",
            "html": "<p>1200 events waiting</p>",
        });
        assert_eq!(body, want);
    }

    #[tokio::test]
    async fn mail_without_html_sends_no_html_and_takes_an_unreadable_success() {
        let server = resend(ResponseTemplate::new(200).set_body_string("not json")).await;
        let sent = mailer(&server.uri())
            .send(&alert(None))
            .await
            .expect("sent");
        assert_eq!(sent.provider_id, None);
        let got = server.received_requests().await.expect("recorded");
        let body: serde_json::Value = got[0].body_json().expect("json");
        assert!(body.get("html").is_none(), "{body}");
    }

    #[tokio::test]
    async fn mail_rate_limits_and_server_errors_are_retryable() {
        let limited = error(429, "rate_limit_exceeded", "Too many requests")
            .insert_header("Retry-After", "3");
        let err = failure(limited).await;
        assert!(err.is_retryable(), "{err:?}");
        assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
        assert!(matches!(
            err,
            MailError::Deferred {
                via: Via::Resend,
                code: 429,
                ..
            }
        ));
        let err = failure(error(503, "internal_server_error", "down")).await;
        assert!(err.is_retryable() && err.retry_after().is_none(), "{err:?}");
        assert!(
            err.to_string().contains("down (internal_server_error)"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn mail_refusals_are_permanent() {
        for (status, name) in [(422, "validation_error"), (403, "invalid_api_key")] {
            let err = failure(error(status, name, "no")).await;
            assert!(!err.is_retryable(), "{err:?}");
            assert!(
                matches!(err, MailError::Refused { code, .. } if code == status),
                "{err:?}"
            );
        }
    }

    #[tokio::test]
    async fn mail_to_an_unreachable_resend_is_retryable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let err = mailer(&format!("http://127.0.0.1:{port}"))
            .send(&alert(None))
            .await
            .expect_err("unreachable");
        assert!(
            matches!(
                err,
                MailError::Unreachable {
                    via: Via::Resend,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.is_retryable());
    }
}
