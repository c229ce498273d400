//! Webhooks as the providers send them to the test connections, signed by the one signer
//! the demo and the load generator use too ([`switchboard_channels::signing`], checked there
//! against the providers' published examples).

use serde_json::{Value, json};
use switchboard_channels::signing as signer;
use switchboard_domain::ChannelKind;

pub use switchboard_channels::signing::Signed;

/// The signing secret of the test Slack connections.
pub const SLACK_SECRET: &str = "slack-signing-secret";
/// The auth token of the test WhatsApp (Twilio) connections.
pub const WHATSAPP_TOKEN: &str = "whatsapp-token";
/// The secret token of the test Telegram connections.
pub const TELEGRAM_SECRET: &str = "tg-secret-0123456789";
/// The webhook secret of the test email (Resend) connections.
pub const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A Slack Events API message event, signed now.
pub fn slack(signing_secret: &str, event_id: &str, user: &str, ts: &str, text: &str) -> Signed {
    let body = serde_json::to_vec(&json!({
        "type": "event_callback", "event_id": event_id, "team_id": "T1",
        "event": {"type": "message", "user": user, "text": text, "ts": ts, "channel": "C1"}
    }))
    .expect("json");
    slack_raw(signing_secret, chrono::Utc::now().timestamp(), body)
}

/// A message event of customer `user` to the test Slack connections ([`SLACK_SECRET`]),
/// event id `Ev{ts}`.
pub fn slack_message(user: &str, ts: &str, text: &str) -> Signed {
    slack(SLACK_SECRET, &format!("Ev{ts}"), user, ts, text)
}

/// Any Slack body signed at `timestamp`.
pub fn slack_raw(signing_secret: &str, timestamp: i64, body: Vec<u8>) -> Signed {
    signer::slack(signing_secret, timestamp, body)
}

/// A WhatsApp message to `url`, as Twilio sends it.
pub fn whatsapp(
    auth_token: &str,
    account_sid: &str,
    url: &str,
    sid: &str,
    from: &str,
    text: &str,
) -> Signed {
    let params = vec![
        ("AccountSid", account_sid.to_owned()),
        ("Body", text.to_owned()),
        ("From", from.to_owned()),
        ("MessageSid", sid.to_owned()),
        ("ProfileName", "Customer".to_owned()),
        ("To", "whatsapp:+15550000000".to_owned()),
    ];
    signer::whatsapp(auth_token, url, params)
}

/// A Telegram update carrying a text message.
pub fn telegram(secret_token: &str, update_id: i64, chat_id: i64, text: &str) -> Signed {
    let body = serde_json::to_vec(&json!({
        "update_id": update_id,
        "message": {"message_id": update_id, "from": {"id": chat_id, "first_name": "Ann"},
                    "chat": {"id": chat_id, "type": "private"}, "text": text, "date": 0}
    }))
    .expect("json");
    signer::telegram(secret_token, body)
}

/// A Resend `email.received` webhook carrying its text.
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
    signer::standard_webhook(whsec, id, timestamp, body).expect("whsec_<base64>")
}

/// Secrets for a test connection of `channel` (a name that is no channel's gets email's).
pub fn secrets(channel: &str) -> Value {
    match channel.parse::<ChannelKind>() {
        Ok(ChannelKind::Slack) => json!({"signing_secret": SLACK_SECRET, "bot_token": "xoxb-1"}),
        Ok(ChannelKind::Whatsapp) => {
            json!({"account_sid": "AC123", "auth_token": WHATSAPP_TOKEN, "from_number": "+15550000000"})
        }
        Ok(ChannelKind::Telegram) => {
            json!({"bot_token": "1:abc", "secret_token": TELEGRAM_SECRET})
        }
        Ok(ChannelKind::Email) | Err(()) => {
            json!({"webhook_secret": WHSEC, "api_key": "re_1", "from_address": "support@example.test"})
        }
    }
}
