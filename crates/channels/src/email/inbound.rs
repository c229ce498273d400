//! Email through Resend, inbound: Standard Webhooks signing and `email.received` parsing.
//! Resend's payload shape has shifted over time, so parsing takes what it can find and
//! falls back rather than refusing.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::text;
use crate::inbound::{
    Channel, InboundError, InboundEvent, InboundMessage, InboundRequest, Verified, check_fresh,
    header, json_body, lenient, req_str, secret,
};

/// The email (Resend) channel.
pub struct Email;

/// A `webhook_secret` must be a Standard Webhooks secret, `whsec_` + base64 of the key, or
/// no signature could ever verify. Names the field, never the value.
pub(crate) fn check_secrets(
    secrets: &serde_json::Map<String, Value>,
) -> Result<(), crate::SecretsError> {
    let secret = secrets
        .get("webhook_secret")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|b64| STANDARD.decode(b64).ok())
        .filter(|key| !key.is_empty());
    match key {
        Some(_) => Ok(()),
        None => Err(crate::SecretsError::EmailWebhookSecret),
    }
}

/// A Standard Webhooks header, under either its spec name or Resend's `svix-` alias.
fn std_header<'a>(req: &InboundRequest<'a>, suffix: &str) -> Option<&'a str> {
    header(req, &format!("webhook-{suffix}")).or_else(|| header(req, &format!("svix-{suffix}")))
}

/// Checks a Standard Webhooks `signature` header (space-separated `v1,<base64>` entries,
/// any one matching passes, so keys can rotate) against HMAC-SHA256 over
/// `{id}.{timestamp}.{body}` keyed with the base64 part of the `whsec_` secret. Public so
/// the primitive can be tested against the spec's example.
pub fn verify_signature(
    secret: &str,
    id: &str,
    timestamp: &str,
    body: &[u8],
    signature: &str,
) -> Result<(), InboundError> {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .map_err(|_| InboundError::Secret("webhook_secret"))?;
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key).map_err(|_| InboundError::Secret("webhook_secret"))?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    let matched = signature
        .split_whitespace()
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|sig| STANDARD.decode(sig).ok())
        .any(|sig| mac.clone().verify_slice(&sig).is_ok());
    if matched {
        Ok(())
    } else {
        Err(InboundError::BadSignature)
    }
}

impl Channel for Email {
    fn secret_fields(&self) -> &'static [&'static str] {
        &["webhook_secret", "api_key", "from_address"]
    }

    fn inbound_secret_field(&self) -> &'static str {
        "webhook_secret"
    }

    fn check_secrets(
        &self,
        secrets: &serde_json::Map<String, Value>,
    ) -> Result<(), crate::SecretsError> {
        check_secrets(secrets)
    }

    fn verify(&self, secrets: &Value, req: &InboundRequest<'_>) -> Result<(), InboundError> {
        let key = secret(secrets, "webhook_secret")?;
        let (Some(id), Some(ts), Some(sig)) = (
            std_header(req, "id"),
            std_header(req, "timestamp"),
            std_header(req, "signature"),
        ) else {
            return Err(InboundError::MissingSignature);
        };
        check_fresh(ts, req.now_unix)?;
        verify_signature(key, id, ts, req.body, sig)
    }

    /// An `email.received` dedups on the email's Message-ID, so one email that reaches us
    /// as two webhook messages (re-sent, re-routed) is stored once; without one, and for
    /// every other event type, the webhook id is the key, which provider retries keep.
    fn parse(&self, req: &InboundRequest<'_>) -> Result<Verified, InboundError> {
        let payload = json_body(req.body)?;
        let kind = req_str(&payload, "/type")?;
        let data = &payload["data"];
        let webhook_id = std_header(req, "id").unwrap_or_default();
        let message_id = message_id(data);
        if kind != "email.received" {
            // Delivery events about one email share its Message-ID; each is its own event.
            let dedup_key = webhook_id.to_owned();
            return Ok(Verified::Event(InboundEvent {
                dedup_key,
                message: None,
                payload,
            }));
        }
        let dedup_key = message_id.unwrap_or(webhook_id).to_owned();
        let message = lenient(
            "email",
            &dedup_key,
            message(data, message_id, webhook_id).map(Some),
        );
        Ok(Verified::Event(InboundEvent {
            dedup_key,
            message,
            payload,
        }))
    }
}

/// `data.message_id`, else a `message-id` header in `data.headers`, whether that is an
/// object (any key case) or a list of `{name, value}`.
fn message_id(data: &Value) -> Option<&str> {
    let from_headers = || match &data["headers"] {
        Value::Object(map) => map
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("message-id"))
            .and_then(|(_, v)| v.as_str()),
        Value::Array(list) => list
            .iter()
            .find(|h| {
                h["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case("message-id"))
            })
            .and_then(|h| h["value"].as_str()),
        _ => None,
    };
    data["message_id"]
        .as_str()
        .or_else(from_headers)
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

/// Resend's webhook documents metadata only (no body); when neither `text` nor `html` is
/// present the text is empty and the job fetches the body by `data.email_id`.
fn message(
    data: &Value,
    message_id: Option<&str>,
    webhook_id: &str,
) -> Result<InboundMessage, InboundError> {
    let from = match &data["from"] {
        Value::Object(o) => o
            .get("email")
            .or_else(|| o.get("address"))
            .and_then(Value::as_str),
        other => other.as_str(),
    }
    .ok_or_else(|| InboundError::Malformed("missing /data/from".into()))?;
    let (mut name, address) = text::parse_address(from)
        .ok_or_else(|| InboundError::Malformed("unreadable /data/from address".into()))?;
    if let Some(n) = data["from"]["name"].as_str().filter(|n| !n.is_empty()) {
        name = Some(n.to_owned());
    }
    let body = match (data["text"].as_str(), data["html"].as_str()) {
        (Some(t), _) if !t.trim().is_empty() => t.to_owned(),
        (_, Some(html)) => text::html_to_text(html),
        _ => String::new(),
    };
    let subject = data["subject"].as_str().unwrap_or_default();
    let id = message_id
        .or_else(|| data["email_id"].as_str())
        .unwrap_or(webhook_id);
    Ok(InboundMessage {
        customer_external_id: address.clone(),
        customer_name: name,
        text: body,
        channel_message_id: id.to_owned(),
        reply_to: json!({
            "to": address,
            "subject": text::reply_subject(subject),
            "in_reply_to": message_id,
        }),
    })
}

#[cfg(test)]
mod tests;
