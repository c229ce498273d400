//! Telegram Bot API, inbound: the webhook secret token and `Update` parsing.

use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::inbound::{
    Channel, InboundError, InboundEvent, InboundMessage, InboundRequest, Verified, header,
    json_body, lenient, secret,
};

/// The Telegram channel.
pub struct Telegram;

/// Shortest `secret_token` accepted: it is the webhook's only authentication.
pub const MIN_SECRET_TOKEN_LEN: usize = 16;

/// Telegram's own rule for `setWebhook`'s `secret_token` (1–256 of `A-Z a-z 0-9 _ -`), with a
/// floor of [`MIN_SECRET_TOKEN_LEN`]: a token Telegram would refuse, or one short enough to
/// guess, is refused when the connection is created. Names the field, never the value.
pub(crate) fn check_secrets(
    secrets: &serde_json::Map<String, Value>,
) -> Result<(), crate::SecretsError> {
    let token = secrets
        .get("secret_token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let allowed = token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if (MIN_SECRET_TOKEN_LEN..=256).contains(&token.len()) && allowed {
        Ok(())
    } else {
        Err(crate::SecretsError::TelegramSecretToken)
    }
}

impl Channel for Telegram {
    fn secret_fields(&self) -> &'static [&'static str] {
        &["bot_token", "secret_token"]
    }

    fn inbound_secret_field(&self) -> &'static str {
        "secret_token"
    }

    fn check_secrets(
        &self,
        secrets: &serde_json::Map<String, Value>,
    ) -> Result<(), crate::SecretsError> {
        check_secrets(secrets)
    }

    /// Telegram does not sign bodies; it echoes the `secret_token` given to `setWebhook`.
    /// The comparison is constant time (it leaks only the length).
    fn verify(&self, secrets: &Value, req: &InboundRequest<'_>) -> Result<(), InboundError> {
        let expected = secret(secrets, "secret_token")?;
        let got =
            header(req, "x-telegram-bot-api-secret-token").ok_or(InboundError::MissingSignature)?;
        if bool::from(got.as_bytes().ct_eq(expected.as_bytes())) {
            Ok(())
        } else {
            Err(InboundError::BadSignature)
        }
    }

    /// Only a new `message` with text (or a captioned photo/document) is a message; edits,
    /// callbacks, joins and the like are stored without one, so an edit never triggers a
    /// second reply.
    fn parse(&self, req: &InboundRequest<'_>) -> Result<Verified, InboundError> {
        let payload = json_body(req.body)?;
        let update_id = payload["update_id"]
            .as_i64()
            .ok_or_else(|| InboundError::Malformed("missing integer /update_id".into()))?;
        let dedup_key = update_id.to_string();
        let message = lenient("telegram", &dedup_key, message(&payload["message"]));
        Ok(Verified::Event(InboundEvent {
            dedup_key,
            message,
            payload,
        }))
    }
}

fn message(msg: &Value) -> Result<Option<InboundMessage>, InboundError> {
    let Some(text) = msg["text"].as_str().or_else(|| msg["caption"].as_str()) else {
        return Ok(None);
    };
    let int = |pointer: &str| {
        msg.pointer(pointer)
            .and_then(Value::as_i64)
            .ok_or_else(|| InboundError::Malformed(format!("missing integer /message{pointer}")))
    };
    let (chat_id, message_id, from_id) = (int("/chat/id")?, int("/message_id")?, int("/from/id")?);
    let from = &msg["from"];
    let full_name = [from["first_name"].as_str(), from["last_name"].as_str()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let customer_name = Some(full_name)
        .filter(|n| !n.is_empty())
        .or_else(|| from["username"].as_str().map(str::to_owned));
    Ok(Some(InboundMessage {
        customer_external_id: from_id.to_string(),
        customer_name,
        text: text.to_owned(),
        channel_message_id: format!("{chat_id}:{message_id}"),
        // The reply quotes the message it answers (`reply_parameters`).
        reply_to: json!({"chat_id": chat_id, "message_id": message_id}),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{event, headers, request};
    use switchboard_domain::ChannelKind;

    const TOKEN: &str = "s3cr3t-token_value";
    /// A private chat's text message, the first of the property tests' shapes.
    const MSG: &str = crate::telegram::proptests::BASES[0];

    fn run(token: Option<&str>, body: &str) -> Result<Verified, InboundError> {
        let h = match token {
            Some(t) => headers(&[("X-Telegram-Bot-Api-Secret-Token", t)]),
            None => headers(&[]),
        };
        let secrets = json!({"bot_token": "123:abc", "secret_token": TOKEN});
        crate::verify_and_parse(
            ChannelKind::Telegram,
            &secrets,
            &request(&h, body.as_bytes(), "u"),
        )
    }

    #[test]
    fn valid_message_is_parsed() {
        let e = event(run(Some(TOKEN), MSG).expect("verified"));
        assert_eq!(e.dedup_key, "10001");
        assert_eq!(e.payload["message"]["chat"]["type"], "private");
        let m = e.message.expect("message");
        assert_eq!(m.customer_external_id, "555");
        assert_eq!(m.customer_name.as_deref(), Some("Ada Lovelace"));
        assert_eq!(m.text, "hello bot");
        assert_eq!(m.channel_message_id, "-100200:7");
        assert_eq!(m.reply_to, json!({"chat_id": -100200, "message_id": 7}));
    }

    #[test]
    fn username_is_the_fallback_name() {
        let body = MSG.replace(r#""first_name":"Ada","last_name":"Lovelace","#, "");
        let m = event(run(Some(TOKEN), &body).expect("ok"))
            .message
            .expect("message");
        assert_eq!(m.customer_name.as_deref(), Some("ada"));
    }

    #[test]
    fn wrong_or_missing_token_is_refused() {
        assert_eq!(
            run(Some("s3cr3t-token_valuf"), MSG),
            Err(InboundError::BadSignature)
        );
        assert_eq!(run(Some("s3cr3t"), MSG), Err(InboundError::BadSignature));
        assert_eq!(run(Some(""), MSG), Err(InboundError::BadSignature));
        assert_eq!(run(None, MSG), Err(InboundError::MissingSignature));
    }

    #[test]
    fn verified_garbage_is_malformed() {
        assert!(matches!(
            run(Some(TOKEN), "{oops"),
            Err(InboundError::Malformed(_))
        ));
        let no_id = r#"{"message":{"text":"x"}}"#;
        assert!(matches!(
            run(Some(TOKEN), no_id),
            Err(InboundError::Malformed(_))
        ));
        let no_chat = MSG.replace(r#""chat":{"id":-100200,"type":"private"},"#, "");
        // A sound update with a broken message is kept, without a message.
        let e = event(run(Some(TOKEN), &no_chat).expect("kept"));
        assert_eq!((e.dedup_key.as_str(), e.message), ("10001", None));
    }

    #[test]
    fn edits_and_textless_updates_need_no_processing() {
        let edited = MSG.replace(r#""message":"#, r#""edited_message":"#);
        let sticker = MSG.replace(r#""text":"hello bot""#, r#""sticker":{"file_id":"f"}"#);
        for body in [edited, sticker] {
            let e = event(run(Some(TOKEN), &body).expect("verified"));
            assert_eq!((e.dedup_key.as_str(), e.message), ("10001", None));
        }
    }
}
