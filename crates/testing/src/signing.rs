//! Webhook requests signed the way each provider signs them, computed here with plain
//! `hmac`, independently of the code under test.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};

/// A request ready to send: headers, body and content type.
pub struct Signed {
    /// Header name/value pairs.
    pub headers: Vec<(String, String)>,
    /// Raw body.
    pub body: Vec<u8>,
}

fn hmac256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("key");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// A Slack Events API message event.
pub fn slack(signing_secret: &str, event_id: &str, user: &str, ts: &str, text: &str) -> Signed {
    let body = serde_json::to_vec(&json!({
        "type": "event_callback", "event_id": event_id, "team_id": "T1",
        "event": {"type": "message", "user": user, "text": text, "ts": ts, "channel": "C1"}
    }))
    .expect("json");
    slack_raw(signing_secret, chrono::Utc::now().timestamp(), body)
}

/// Any Slack body signed at `timestamp`.
pub fn slack_raw(signing_secret: &str, timestamp: i64, body: Vec<u8>) -> Signed {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(&body);
    let sig = format!(
        "v0={}",
        hex::encode(hmac256(signing_secret.as_bytes(), &base))
    );
    Signed {
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("x-slack-request-timestamp".into(), timestamp.to_string()),
            ("x-slack-signature".into(), sig),
        ],
        body,
    }
}

/// A Twilio WhatsApp message, signed over `url` plus the sorted form parameters.
pub fn twilio(
    auth_token: &str,
    account_sid: &str,
    url: &str,
    sid: &str,
    from: &str,
    text: &str,
) -> Signed {
    let mut params = vec![
        ("AccountSid", account_sid),
        ("Body", text),
        ("From", from),
        ("MessageSid", sid),
        ("ProfileName", "Customer"),
        ("To", "whatsapp:+15550000000"),
    ];
    params.sort_by_key(|p| p.0);
    let mut data = url.to_owned();
    for (k, v) in &params {
        data.push_str(k);
        data.push_str(v);
    }
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(auth_token.as_bytes()).expect("key");
    mac.update(data.as_bytes());
    let sig = STANDARD.encode(mac.finalize().into_bytes());
    Signed {
        headers: vec![
            (
                "content-type".into(),
                "application/x-www-form-urlencoded".into(),
            ),
            ("x-twilio-signature".into(), sig),
        ],
        body: serde_urlencoded::to_string(&params)
            .expect("form")
            .into_bytes(),
    }
}

/// A Telegram update carrying a text message.
pub fn telegram(secret_token: &str, update_id: i64, chat_id: i64, text: &str) -> Signed {
    let body = serde_json::to_vec(&json!({
        "update_id": update_id,
        "message": {"message_id": update_id, "from": {"id": chat_id, "first_name": "Ann"},
                    "chat": {"id": chat_id, "type": "private"}, "text": text, "date": 0}
    }))
    .expect("json");
    Signed {
        headers: vec![
            ("content-type".into(), "application/json".into()),
            (
                "x-telegram-bot-api-secret-token".into(),
                secret_token.into(),
            ),
        ],
        body,
    }
}

/// A Resend `email.received` webhook signed with Standard Webhooks.
pub fn email(whsec: &str, webhook_id: &str, message_id: &str, from: &str, text: &str) -> Signed {
    let body = serde_json::to_vec(&json!({
        "type": "email.received", "created_at": "2026-11-29T10:00:00Z",
        "data": {"email_id": webhook_id, "from": from, "to": ["support@example.test"],
                 "subject": "Help", "text": text, "message_id": message_id}
    }))
    .expect("json");
    standard_webhook(whsec, webhook_id, chrono::Utc::now().timestamp(), body)
}

/// Any body signed per Standard Webhooks.
pub fn standard_webhook(whsec: &str, id: &str, timestamp: i64, body: Vec<u8>) -> Signed {
    let key = STANDARD
        .decode(whsec.trim_start_matches("whsec_"))
        .expect("whsec base64");
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(&body);
    let sig = format!("v1,{}", STANDARD.encode(hmac256(&key, &content)));
    Signed {
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("webhook-id".into(), id.into()),
            ("webhook-timestamp".into(), timestamp.to_string()),
            ("webhook-signature".into(), sig),
        ],
        body,
    }
}

/// Secrets for a test connection of `channel`.
pub fn secrets(channel: &str) -> Value {
    match channel {
        "slack" => json!({"signing_secret": "slack-signing-secret", "bot_token": "xoxb-1"}),
        "whatsapp" => {
            json!({"account_sid": "AC123", "auth_token": "twilio-token", "from_number": "+15550000000"})
        }
        "telegram" => json!({"bot_token": "1:abc", "secret_token": "tg-secret-0123456789"}),
        _ => {
            json!({"webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "api_key": "re_1", "from_address": "support@example.test"})
        }
    }
}
