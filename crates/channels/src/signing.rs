//! Inbound webhooks signed the way each provider signs them, for whatever stands in for a
//! provider: the demo's customer simulator, the load generator and the integration tests.
//!
//! One signer for all three, so a provider's scheme is written down once. It shares no code
//! with the verifiers in this crate (it computes each MAC itself from the provider's
//! documentation; only WhatsApp's header name comes from its folder), and its tests check it
//! against the providers' published examples (WhatsApp's beside the channel, in
//! `whatsapp/mod.rs`) as well as against the verifiers: a verifier bug cannot hide behind a
//! signer that makes the same mistake without one of the two checks failing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};

/// Headers and body of one signed request.
#[derive(Debug, Clone)]
pub struct Signed {
    /// Header name/value pairs, content type included.
    pub headers: Vec<(&'static str, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

/// A Standard Webhooks secret that is not `whsec_<base64>`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the email webhook_secret is not whsec_<base64>")]
pub struct InvalidWhsec;

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length; this cannot fail.
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Slack's `X-Slack-Signature`: `v0=` hex HMAC-SHA256 of `v0:{timestamp}:{body}` keyed with
/// the signing secret.
pub fn slack_signature(signing_secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(body);
    format!(
        "v0={}",
        hex::encode(hmac_sha256(signing_secret.as_bytes(), &base))
    )
}

/// A Slack Events API request: `body` signed at `timestamp`.
pub fn slack(signing_secret: &str, timestamp: i64, body: Vec<u8>) -> Signed {
    let signature = slack_signature(signing_secret, timestamp, &body);
    Signed {
        headers: vec![
            ("content-type", "application/json".into()),
            ("x-slack-request-timestamp", timestamp.to_string()),
            ("x-slack-signature", signature),
        ],
        body,
    }
}

/// A WhatsApp request, as Twilio sends it: the form `params`, signed with base64 HMAC-SHA1
/// over the public URL followed by every parameter name and value, sorted by name.
pub fn whatsapp(auth_token: &str, public_url: &str, mut params: Vec<(&str, String)>) -> Signed {
    params.sort_by(|a, b| a.0.cmp(b.0));
    let mut data = public_url.to_owned();
    for (name, value) in &params {
        data.push_str(name);
        data.push_str(value);
    }
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(auth_token.as_bytes())
        .unwrap_or_else(|_| unreachable!());
    mac.update(data.as_bytes());
    let signature = STANDARD.encode(mac.finalize().into_bytes());
    // Pairs of strings always encode.
    let body = serde_urlencoded::to_string(&params).unwrap_or_default();
    Signed {
        headers: vec![
            ("content-type", "application/x-www-form-urlencoded".into()),
            (crate::whatsapp::SIGNATURE_HEADER, signature),
        ],
        body: body.into_bytes(),
    }
}

/// A Telegram update: the secret token chosen at `setWebhook`, echoed in a header.
pub fn telegram(secret_token: &str, body: Vec<u8>) -> Signed {
    Signed {
        headers: vec![
            ("content-type", "application/json".into()),
            ("x-telegram-bot-api-secret-token", secret_token.into()),
        ],
        body,
    }
}

/// A Standard Webhooks request (Resend): `v1,` base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`
/// keyed with the base64 part of the `whsec_` secret.
pub fn standard_webhook(
    whsec: &str,
    id: &str,
    timestamp: i64,
    body: Vec<u8>,
) -> Result<Signed, InvalidWhsec> {
    let key = STANDARD
        .decode(whsec.trim_start_matches("whsec_"))
        .map_err(|_| InvalidWhsec)?;
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(&body);
    let signature = format!("v1,{}", STANDARD.encode(hmac_sha256(&key, &content)));
    Ok(Signed {
        headers: vec![
            ("content-type", "application/json".into()),
            ("webhook-id", id.into()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ],
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbound::{InboundRequest, Verified};
    use serde_json::json;
    use switchboard_domain::ChannelKind;

    const NOW: i64 = 1_700_000_000;

    fn header<'a>(signed: &'a Signed, name: &str) -> &'a str {
        signed
            .headers
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// What the verifier of `kind` makes of `signed` arriving at `url`.
    fn verify(kind: ChannelKind, secrets: &serde_json::Value, signed: &Signed, url: &str) -> bool {
        let mut headers = http::HeaderMap::new();
        for (name, value) in &signed.headers {
            headers.insert(*name, value.parse().expect("header value"));
        }
        let req = InboundRequest {
            headers: &headers,
            body: &signed.body,
            public_url: url,
            now_unix: NOW,
        };
        matches!(
            crate::verify_and_parse(kind, secrets, &req),
            Ok(Verified::Event(_))
        )
    }

    #[test]
    fn slack_signature_matches_slacks_documented_example() {
        // https://api.slack.com/authentication/verifying-requests-from-slack
        let body = crate::test_support::SLACK_DOCS_BODY.as_bytes().to_vec();
        let signed = slack("8f742231b10e8888abcd99yyyzzz85a5", 1531420618, body);
        assert_eq!(
            header(&signed, "x-slack-signature"),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn standard_webhook_matches_the_specs_example() {
        // https://github.com/standard-webhooks/standard-webhooks (the spec's test vector).
        let signed = standard_webhook(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#.to_vec(),
        )
        .expect("whsec");
        assert_eq!(
            header(&signed, "webhook-signature"),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert_eq!(
            standard_webhook("not base64 %%", "id", 0, Vec::new()).err(),
            Some(InvalidWhsec)
        );
    }

    #[test]
    fn every_signed_request_passes_its_verifier_and_a_wrong_secret_does_not() {
        let slack_body = json!({"type": "event_callback", "event_id": "Ev1", "team_id": "T1",
            "event": {"type": "message", "user": "U1", "text": "hi", "ts": "1.5", "channel": "C1"}});
        let slack_secrets = json!({"signing_secret": "s3cret", "bot_token": "xoxb-1"});
        let signed = slack("s3cret", NOW, slack_body.to_string().into_bytes());
        assert!(verify(ChannelKind::Slack, &slack_secrets, &signed, "u"));
        let forged = slack("other", NOW, slack_body.to_string().into_bytes());
        assert!(!verify(ChannelKind::Slack, &slack_secrets, &forged, "u"));

        let url = "https://switchboard.test/webhooks/whatsapp/1";
        let whatsapp_secrets =
            json!({"account_sid": "AC1", "auth_token": "tok", "from_number": "+15550000000"});
        let params = || {
            vec![
                ("AccountSid", "AC1".to_owned()),
                ("MessageSid", "SM1".to_owned()),
                ("From", "whatsapp:+15551234567".to_owned()),
                ("To", "whatsapp:+15550000000".to_owned()),
                ("Body", "hi & bye".to_owned()),
            ]
        };
        assert!(verify(
            ChannelKind::Whatsapp,
            &whatsapp_secrets,
            &whatsapp("tok", url, params()),
            url
        ));
        assert!(!verify(
            ChannelKind::Whatsapp,
            &whatsapp_secrets,
            &whatsapp("other", url, params()),
            url
        ));

        let update = json!({"update_id": 1, "message": {"message_id": 1, "date": 0, "text": "hi",
            "from": {"id": 7, "first_name": "Ann"}, "chat": {"id": 7, "type": "private"}}});
        let telegram_secrets =
            json!({"bot_token": "1:abc", "secret_token": "tg-secret-0123456789"});
        let body = || update.to_string().into_bytes();
        assert!(verify(
            ChannelKind::Telegram,
            &telegram_secrets,
            &telegram("tg-secret-0123456789", body()),
            "u"
        ));
        assert!(!verify(
            ChannelKind::Telegram,
            &telegram_secrets,
            &telegram("tg-secret-9876543210", body()),
            "u"
        ));

        let whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let email_secrets =
            json!({"webhook_secret": whsec, "api_key": "re_1", "from_address": "s@acme.test"});
        let mail = json!({"type": "email.received", "created_at": "2026-11-29T10:00:00Z",
            "data": {"email_id": "e1", "from": "ann@example.test", "to": ["s@acme.test"],
                     "subject": "Help", "text": "hi", "message_id": "<m1@example.test>"}});
        let body = || mail.to_string().into_bytes();
        let signed = standard_webhook(whsec, "msg_1", NOW, body()).expect("whsec");
        assert!(verify(ChannelKind::Email, &email_secrets, &signed, "u"));
        let other = standard_webhook("whsec_AAAAAAAAAAAAAAAAAAAAAAAA", "msg_1", NOW, body())
            .expect("whsec");
        assert!(!verify(ChannelKind::Email, &email_secrets, &other, "u"));
    }
}
