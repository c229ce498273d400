//! Email through Resend's `POST /emails`. Resend is the one provider here that
//! deduplicates on our key (`Idempotency-Key`, for 24 hours), so a retry after a lost
//! answer cannot send the email twice even if the caller never saw the acceptance.
//! Threading headers make the reply land in the customer's existing conversation.

use reqwest::{Client, RequestBuilder};
use serde_json::json;
use url::Url;

use crate::outbound::{
    Answer, FieldError, Outbound, PartOutcome, PartRequest, endpoint, non_empty, reply_str, secret,
};

/// Used when the inbound email had no subject to answer to.
const FALLBACK_SUBJECT: &str = "Re: your message";

pub(crate) struct Api;

impl Outbound for Api {
    fn build(
        &self,
        client: &Client,
        base: &Url,
        req: &PartRequest<'_>,
    ) -> Result<RequestBuilder, FieldError> {
        let api_key = secret(req, "api_key")?;
        let from = secret(req, "from_address")?;
        let to = reply_str(req, "to")?;
        let subject = non_empty(req.reply_to, "subject").unwrap_or(FALLBACK_SUBJECT);
        let mut body = json!({"from": from, "to": [to], "subject": subject, "text": req.text});
        if let Some(parent) = non_empty(req.reply_to, "in_reply_to") {
            body["headers"] = json!({"In-Reply-To": parent, "References": parent});
        }
        // Each part is its own email, so each needs its own key; one part keeps the bare
        // outbox id, which is what SPEC §3 promises.
        let key = match req.parts {
            0 | 1 => req.idempotency_key.to_owned(),
            _ => format!("{}-{}", req.idempotency_key, req.part),
        };
        let url = endpoint(req.channel, base, &["emails"])?;
        Ok(client
            .post(url)
            .bearer_auth(api_key)
            .header("Idempotency-Key", key)
            .json(&body))
    }

    /// A 409 `concurrent_idempotent_requests` means our earlier attempt with the same key
    /// is still in flight: asking again later returns its result. Any other 409 (same key,
    /// different payload) will never succeed.
    fn classify(&self, answer: &Answer, req: &PartRequest<'_>) -> PartOutcome {
        if answer.is_success() {
            let id = answer.body["id"].as_str().unwrap_or_default();
            return PartOutcome::Accepted {
                provider_id: id.to_owned(),
            };
        }
        let name = answer.body["name"].as_str();
        let detail = match (name, answer.body["message"].as_str()) {
            (Some(name), Some(message)) => format!("{message} ({name})"),
            (None, Some(message)) => message.to_owned(),
            (Some(name), None) => name.to_owned(),
            (None, None) => answer.snippet(),
        };
        if answer.status == 409 && name == Some("concurrent_idempotent_requests") {
            return PartOutcome::Retry {
                after: answer.retry_after,
                reason: format!("resend is still processing this key: {detail}"),
                status: Some(409),
            };
        }
        answer.failure(req.channel, &detail)
    }
}

#[cfg(test)]
mod tests {
    use crate::outbound::testkit::*;
    use switchboard_domain::ChannelKind::Email;

    fn secrets() -> serde_json::Value {
        json!({"webhook_secret": "whsec_abc", "api_key": "re_test_key", "from_address": "Support <s@acme.test>"})
    }

    fn queued() -> Reply {
        Reply::new(200).set_body_json(json!({"id": "4ef9a417-02e9-4d39-ad75-9611e0fcc33c"}))
    }

    #[tokio::test]
    async fn first_reply_is_sent_with_the_outbox_key() {
        let server = provider(queued()).await;
        let secrets = secrets();
        let reply_to =
            json!({"to": "ada@example.com", "subject": "Re: Order", "in_reply_to": null});
        let out = providers(&server.uri())
            .send_part(&part(Email, &secrets, &reply_to, "Your order ships today."))
            .await;
        assert_eq!(
            verdict(&out),
            (
                "accepted",
                None,
                None,
                "4ef9a417-02e9-4d39-ad75-9611e0fcc33c"
            )
        );
        let sent = only_request(&server).await;
        assert_eq!(sent.method.as_str(), "POST");
        assert_eq!(sent.url.path(), "/emails");
        assert_eq!(header(&sent, "authorization"), "Bearer re_test_key");
        assert_eq!(header(&sent, "idempotency-key"), "outbox-1");
        assert_eq!(header(&sent, "content-type"), "application/json");
        let body: serde_json::Value = sent.body_json().expect("json");
        let want = json!({
            "from": "Support <s@acme.test>", "to": ["ada@example.com"],
            "subject": "Re: Order", "text": "Your order ships today."
        });
        assert_eq!(body, want);
    }

    #[tokio::test]
    async fn threaded_reply_carries_threading_headers() {
        let server = provider(queued()).await;
        let secrets = secrets();
        let reply_to = json!({"to": "ada@example.com", "in_reply_to": "<CAF1@mail.example.com>"});
        let req = super::PartRequest {
            part: 1,
            parts: 2,
            ..part(Email, &secrets, &reply_to, "Later")
        };
        let out = providers(&format!("{}/", server.uri()))
            .send_part(&req)
            .await;
        assert_eq!(verdict(&out).0, "accepted");
        let sent = only_request(&server).await;
        assert_eq!(sent.url.path(), "/emails");
        assert_eq!(header(&sent, "idempotency-key"), "outbox-1-1");
        let body: serde_json::Value = sent.body_json().expect("json");
        assert_eq!(body["subject"], "Re: your message");
        let threading = json!({"In-Reply-To": "<CAF1@mail.example.com>", "References": "<CAF1@mail.example.com>"});
        assert_eq!(body["headers"], threading);
    }

    async fn outcome_of(reply: Reply) -> super::PartOutcome {
        let server = provider(reply).await;
        let (secrets, reply_to) = (secrets(), json!({"to": "ada@example.com"}));
        providers(&server.uri())
            .send_part(&part(Email, &secrets, &reply_to, "hi"))
            .await
    }

    fn error(status: u16, name: &str, message: &str) -> Reply {
        Reply::new(status)
            .set_body_json(json!({"statusCode": status, "name": name, "message": message}))
    }

    #[tokio::test]
    async fn rate_limit_is_retried_after_the_given_delay() {
        let limited = error(429, "rate_limit_exceeded", "Too many requests")
            .insert_header("Retry-After", "2");
        let (kind, after, status, _) = verdict(&outcome_of(limited).await);
        assert_eq!((kind, after, status), ("retry", Some(2), Some(429)));
    }

    #[tokio::test]
    async fn server_errors_and_concurrent_keys_are_retried() {
        let out = outcome_of(error(500, "internal_server_error", "oops")).await;
        let (kind, after, status, _) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, Some(500)));
        let busy = error(409, "concurrent_idempotent_requests", "Same key in flight");
        let (kind, _, status, _) = verdict(&outcome_of(busy).await);
        assert_eq!((kind, status), ("retry", Some(409)));
    }

    #[tokio::test]
    async fn refusals_are_permanent() {
        let reused = error(
            409,
            "invalid_idempotent_request",
            "Same key, different payload",
        );
        assert_eq!(verdict(&outcome_of(reused).await).0, "permanent");
        let invalid = error(422, "validation_error", "Invalid `to` field.");
        let out = outcome_of(invalid).await;
        let (kind, _, status, reason) = verdict(&out);
        assert_eq!((kind, status), ("permanent", Some(422)));
        assert!(reason.contains("Invalid `to` field."), "{reason}");
    }

    #[tokio::test]
    async fn unreachable_resend_is_retried() {
        let (secrets, reply_to) = (secrets(), json!({"to": "ada@example.com"}));
        let out = providers(&closed_base())
            .send_part(&part(Email, &secrets, &reply_to, "hi"))
            .await;
        let (kind, after, status, _) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, None));
    }

    #[tokio::test]
    async fn missing_recipient_is_permanent() {
        let out = providers(&closed_base())
            .send_part(&part(Email, &secrets(), &json!({"subject": "Re: x"}), "hi"))
            .await;
        assert_eq!(
            verdict(&out),
            (
                "permanent",
                None,
                None,
                "email reply_to lacks a usable `to`"
            )
        );
    }
}
