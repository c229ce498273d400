//! Telegram Bot API `sendMessage`. The bot token is part of the URL path, which is why
//! no reason built here or in the transport layer ever includes the URL. Telegram says
//! how long to back off in the body (`parameters.retry_after`), not in a header.

use std::time::Duration;

use reqwest::{Client, RequestBuilder};
use serde_json::{Value, json};
use url::Url;

use crate::outbound::{Answer, FieldError, Outbound, PartOutcome, PartRequest, endpoint, secret};

pub(crate) struct Api;

impl Outbound for Api {
    /// Only the first part quotes the customer's message: quoting it from every part of a
    /// long answer would be noise. `allow_sending_without_reply` keeps the answer flowing
    /// when the customer has deleted the message it quotes.
    fn build(
        &self,
        client: &Client,
        base: &Url,
        req: &PartRequest<'_>,
    ) -> Result<RequestBuilder, FieldError> {
        let bot = format!("bot{}", secret(req, "bot_token")?);
        let chat_id = match req.reply_to.get("chat_id") {
            Some(id @ Value::Number(_)) => id.clone(),
            Some(Value::String(id)) if !id.trim().is_empty() => Value::from(id.as_str()),
            _ => return Err(FieldError::ReplyTo(req.channel, "chat_id")),
        };
        let mut body = json!({"chat_id": chat_id, "text": req.text});
        let quoted = req.reply_to.get("message_id").and_then(Value::as_i64);
        if let (0, Some(message_id)) = (req.part, quoted) {
            body["reply_parameters"] =
                json!({"message_id": message_id, "allow_sending_without_reply": true});
        }
        let url = endpoint(req.channel, base, &[&bot, "sendMessage"])?;
        Ok(client.post(url).json(&body))
    }

    fn classify(&self, answer: &Answer, req: &PartRequest<'_>) -> PartOutcome {
        if answer.is_success() {
            let id = &answer.body["result"]["message_id"];
            let provider_id = id.as_i64().map(|n| n.to_string()).unwrap_or_default();
            return PartOutcome::Accepted { provider_id };
        }
        let description = answer.body["description"].as_str();
        let detail = description.map_or_else(|| answer.snippet(), str::to_owned);
        match answer.status {
            429 => PartOutcome::Retry {
                after: answer.body["parameters"]["retry_after"]
                    .as_u64()
                    .map(Duration::from_secs)
                    .or(answer.retry_after),
                reason: format!("telegram rate limited the bot: {detail}"),
                status: Some(429),
            },
            403 => PartOutcome::Permanent {
                reason: format!("the customer blocked the bot or left the chat: {detail}"),
                status: Some(403),
            },
            _ => answer.failure(req.channel, &detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::outbound::testkit::*;
    use switchboard_domain::ChannelKind::Telegram;

    const TOKEN: &str = "123456:AAbot-token";

    fn secrets() -> serde_json::Value {
        json!({"bot_token": TOKEN, "secret_token": "webhook-secret"})
    }

    fn sent_message(id: i64) -> Reply {
        Reply::new(200).set_body_json(json!({"ok": true, "result": {"message_id": id}}))
    }

    #[tokio::test]
    async fn first_reply_without_a_quoted_message() {
        let server = provider(sent_message(42)).await;
        let (secrets, reply_to) = (secrets(), json!({"chat_id": -100200}));
        let out = providers(&server.uri())
            .send_part(&part(Telegram, &secrets, &reply_to, "Hello"))
            .await;
        assert_eq!(verdict(&out), ("accepted", None, None, "42"));
        let sent = only_request(&server).await;
        assert_eq!(sent.method.as_str(), "POST");
        assert_eq!(sent.url.path(), format!("/bot{TOKEN}/sendMessage"));
        assert_eq!(header(&sent, "content-type"), "application/json");
        let body: serde_json::Value = sent.body_json().expect("json");
        assert_eq!(body, json!({"chat_id": -100200, "text": "Hello"}));
    }

    #[tokio::test]
    async fn only_the_first_part_quotes_the_customer() {
        let server = provider(sent_message(43)).await;
        let (secrets, reply_to) = (secrets(), json!({"chat_id": 555, "message_id": 7}));
        let p = providers(&format!("{}/", server.uri()));
        let first = super::PartRequest {
            parts: 2,
            ..part(Telegram, &secrets, &reply_to, "1/2")
        };
        let second = super::PartRequest {
            part: 1,
            text: "2/2",
            ..first
        };
        assert_eq!(verdict(&p.send_part(&first).await).0, "accepted");
        assert_eq!(verdict(&p.send_part(&second).await).0, "accepted");
        let sent = server.received_requests().await.expect("recorded");
        let bodies: Vec<serde_json::Value> =
            sent.iter().map(|r| r.body_json().expect("json")).collect();
        let quote = json!({"message_id": 7, "allow_sending_without_reply": true});
        assert_eq!(
            bodies[0],
            json!({"chat_id": 555, "text": "1/2", "reply_parameters": quote})
        );
        assert_eq!(bodies[1], json!({"chat_id": 555, "text": "2/2"}));
        assert_eq!(sent[1].url.path(), format!("/bot{TOKEN}/sendMessage"));
    }

    async fn outcome_of(reply: Reply) -> super::PartOutcome {
        let server = provider(reply).await;
        let (secrets, reply_to) = (secrets(), json!({"chat_id": 555}));
        providers(&server.uri())
            .send_part(&part(Telegram, &secrets, &reply_to, "hi"))
            .await
    }

    fn error(code: u16, description: &str) -> Reply {
        Reply::new(code)
            .set_body_json(json!({"ok": false, "error_code": code, "description": description}))
    }

    #[tokio::test]
    async fn rate_limit_honours_retry_after_from_the_body() {
        let limited = Reply::new(429).set_body_json(json!({
            "ok": false, "error_code": 429,
            "description": "Too Many Requests: retry after 12",
            "parameters": {"retry_after": 12}
        }));
        let (kind, after, status, _) = verdict(&outcome_of(limited).await);
        assert_eq!((kind, after, status), ("retry", Some(12), Some(429)));
    }

    #[tokio::test]
    async fn server_errors_are_retried() {
        let out = outcome_of(error(502, "Bad Gateway")).await;
        let (kind, after, status, reason) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, Some(502)));
        assert!(reason.contains("Bad Gateway"), "{reason}");
    }

    #[tokio::test]
    async fn blocked_bot_and_bad_requests_are_permanent() {
        let blocked = error(403, "Forbidden: bot was blocked by the user");
        let out = outcome_of(blocked).await;
        let (kind, _, status, reason) = verdict(&out);
        assert_eq!((kind, status), ("permanent", Some(403)));
        assert!(reason.contains("blocked the bot"), "{reason}");
        let missing = error(400, "Bad Request: chat not found");
        let out = outcome_of(missing).await;
        let (kind, _, status, reason) = verdict(&out);
        assert_eq!((kind, status), ("permanent", Some(400)));
        assert!(reason.contains("chat not found"), "{reason}");
    }

    #[tokio::test]
    async fn unreachable_telegram_is_retried_without_leaking_the_token() {
        let (secrets, reply_to) = (secrets(), json!({"chat_id": 555}));
        let out = providers(&closed_base())
            .send_part(&part(Telegram, &secrets, &reply_to, "hi"))
            .await;
        let (kind, after, status, reason) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", None, None));
        assert!(
            !reason.contains("AAbot-token") && !reason.contains("123456"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn missing_chat_id_is_permanent() {
        let out = providers(&closed_base())
            .send_part(&part(Telegram, &secrets(), &json!({"message_id": 7}), "hi"))
            .await;
        assert_eq!(
            verdict(&out),
            (
                "permanent",
                None,
                None,
                "telegram reply_to lacks a usable `chat_id`"
            )
        );
    }
}
