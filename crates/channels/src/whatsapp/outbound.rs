//! WhatsApp through Twilio's Messages API. Twilio reports refusals as a numeric `code`
//! plus a `message`; both go into the reason because the code is what its docs (and
//! support) are indexed by. 63016 gets words of its own: it is the one operators hit most,
//! and the fix (an approved template) is not obvious from Twilio's text.

use reqwest::{Client, RequestBuilder};
use url::Url;

use crate::outbound::{
    Answer, FieldError, Outbound, PartOutcome, PartRequest, endpoint, reply_str, secret,
};

/// Twilio's "outside the 24-hour customer service window" error.
const OUTSIDE_SESSION_WINDOW: i64 = 63016;

pub(crate) struct Api;

/// Twilio routes by the `whatsapp:` prefix: without it the number is an SMS number.
fn whatsapp(number: &str) -> String {
    if number.starts_with("whatsapp:") {
        number.to_owned()
    } else {
        format!("whatsapp:{number}")
    }
}

impl Outbound for Api {
    fn build(
        &self,
        client: &Client,
        base: &Url,
        req: &PartRequest<'_>,
    ) -> Result<RequestBuilder, FieldError> {
        let account_sid = secret(req, "account_sid")?;
        let auth_token = secret(req, "auth_token")?;
        let from = whatsapp(secret(req, "from_number")?);
        let to = whatsapp(reply_str(req, "to")?);
        let path = ["2010-04-01", "Accounts", account_sid, "Messages.json"];
        let url = endpoint(req.channel, base, &path)?;
        let form = [
            ("From", from.as_str()),
            ("To", to.as_str()),
            ("Body", req.text),
        ];
        Ok(client
            .post(url)
            .basic_auth(account_sid, Some(auth_token))
            .form(&form))
    }

    fn classify(&self, answer: &Answer, req: &PartRequest<'_>) -> PartOutcome {
        if answer.is_success() {
            let sid = answer.body["sid"].as_str().unwrap_or_default();
            return PartOutcome::Accepted {
                provider_id: sid.to_owned(),
            };
        }
        let code = answer.body["code"].as_i64();
        let message = answer.body["message"].as_str();
        if code == Some(OUTSIDE_SESSION_WINDOW) && !matches!(answer.status, 429 | 500..=599) {
            return PartOutcome::Permanent {
                reason: format!(
                    "the customer is outside WhatsApp's 24-hour session window: only an approved \
                     template message can reach them now (twilio {OUTSIDE_SESSION_WINDOW}: {})",
                    message.unwrap_or("no message")
                ),
                status: Some(answer.status),
            };
        }
        let detail = match (code, message) {
            (Some(code), Some(message)) => format!("twilio error {code}: {message}"),
            (Some(code), None) => format!("twilio error {code}"),
            (None, Some(message)) => message.to_owned(),
            (None, None) => answer.snippet(),
        };
        answer.failure(req.channel, &detail)
    }
}

#[cfg(test)]
mod tests {
    use crate::outbound::testkit::*;
    use base64::{Engine, engine::general_purpose::STANDARD};
    use switchboard_domain::ChannelKind::Whatsapp;

    const SID: &str = "AC0123456789abcdef";

    fn secrets(from: &str) -> serde_json::Value {
        json!({"account_sid": SID, "auth_token": "twilio-auth-token", "from_number": from})
    }

    fn created() -> Reply {
        Reply::new(201).set_body_json(json!({"sid": "SM123", "status": "queued"}))
    }

    fn form(request: &wiremock::Request) -> Vec<(String, String)> {
        serde_urlencoded::from_bytes(&request.body).expect("form body")
    }

    #[tokio::test]
    async fn first_reply_is_a_form_post_with_basic_auth() {
        let server = provider(created()).await;
        let (secrets, reply_to) = (secrets("+15550001"), json!({"to": "whatsapp:+14155550100"}));
        let out = providers(&server.uri())
            .send_part(&part(Whatsapp, &secrets, &reply_to, "Hi & welcome"))
            .await;
        assert_eq!(verdict(&out), ("accepted", None, None, "SM123"));
        let sent = only_request(&server).await;
        assert_eq!(sent.method.as_str(), "POST");
        assert_eq!(
            sent.url.path(),
            format!("/2010-04-01/Accounts/{SID}/Messages.json")
        );
        let basic = STANDARD.encode(format!("{SID}:twilio-auth-token"));
        assert_eq!(header(&sent, "authorization"), format!("Basic {basic}"));
        assert_eq!(
            header(&sent, "content-type"),
            "application/x-www-form-urlencoded"
        );
        let want = [
            ("From", "whatsapp:+15550001"),
            ("To", "whatsapp:+14155550100"),
        ];
        let mut want: Vec<_> = want.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec();
        want.push(("Body".into(), "Hi & welcome".into()));
        assert_eq!(form(&sent), want);
    }

    #[tokio::test]
    async fn numbers_get_exactly_one_whatsapp_prefix() {
        let server = provider(created()).await;
        let (secrets, reply_to) = (secrets("whatsapp:+15550001"), json!({"to": "+14155550100"}));
        let req = super::PartRequest {
            part: 1,
            parts: 2,
            ..part(Whatsapp, &secrets, &reply_to, "2/2")
        };
        let out = providers(&format!("{}/", server.uri()))
            .send_part(&req)
            .await;
        assert_eq!(verdict(&out).0, "accepted");
        let sent = form(&only_request(&server).await);
        assert_eq!(
            (sent[0].1.as_str(), sent[1].1.as_str()),
            ("whatsapp:+15550001", "whatsapp:+14155550100")
        );
    }

    async fn outcome_of(reply: Reply) -> super::PartOutcome {
        let server = provider(reply).await;
        let (secrets, reply_to) = (secrets("+15550001"), json!({"to": "whatsapp:+1415"}));
        providers(&server.uri())
            .send_part(&part(Whatsapp, &secrets, &reply_to, "hi"))
            .await
    }

    #[tokio::test]
    async fn rate_limit_and_server_errors_are_retried() {
        let limited = Reply::new(429)
            .insert_header("Retry-After", "3")
            .set_body_json(json!({"code": 20429, "message": "Too Many Requests"}));
        let (kind, after, status, _) = verdict(&outcome_of(limited).await);
        assert_eq!((kind, after, status), ("retry", Some(3), Some(429)));
        let (kind, after, status, _) = verdict(&outcome_of(Reply::new(500)).await);
        assert_eq!((kind, after, status), ("retry", None, Some(500)));
    }

    #[tokio::test]
    async fn session_window_error_says_a_template_is_needed() {
        let body =
            json!({"code": 63016, "message": "Failed to send freeform message", "status": 400});
        let out = outcome_of(Reply::new(400).set_body_json(body)).await;
        let (kind, _, status, reason) = verdict(&out);
        assert_eq!((kind, status), ("permanent", Some(400)));
        assert!(
            reason.contains("24-hour") && reason.contains("template"),
            "{reason}"
        );
        let body = json!({"code": 21211, "message": "Invalid 'To' Phone Number"});
        let out = outcome_of(Reply::new(400).set_body_json(body)).await;
        let (kind, _, _, reason) = verdict(&out);
        assert_eq!(kind, "permanent");
        assert!(
            reason.contains("21211") && reason.contains("Invalid 'To'"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn echoed_secrets_are_redacted() {
        let message = format!(
            "The requested resource /2010-04-01/Accounts/{SID}/Messages.json was not found"
        );
        let body = json!({"code": 20404, "message": message});
        let out = outcome_of(Reply::new(404).set_body_json(body)).await;
        let (kind, _, _, reason) = verdict(&out);
        assert_eq!(kind, "permanent");
        assert!(
            !reason.contains(SID) && reason.contains("[redacted]"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn unreachable_twilio_is_retried() {
        let (secrets, reply_to) = (secrets("+1555"), json!({"to": "whatsapp:+1415"}));
        let out = providers(&closed_base())
            .send_part(&part(Whatsapp, &secrets, &reply_to, "hi"))
            .await;
        let (kind, after, status, reason) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, None));
        assert!(!reason.contains(SID), "{reason}");
    }
}
