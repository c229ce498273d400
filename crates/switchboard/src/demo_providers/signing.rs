//! Inbound webhooks signed the way each provider signs them (SPEC §3 F1), for the customer
//! simulator. Independent of `switchboard-channels`, which verifies them: a demo that sent
//! through the verifier's own code would prove nothing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};

/// Headers and body of one signed request.
pub struct Signed {
    /// Header name/value pairs, content type included.
    pub headers: Vec<(&'static str, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length; this cannot fail.
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Slack: `v0=` hex HMAC-SHA256 of `v0:{timestamp}:{body}` with the signing secret.
pub fn slack(signing_secret: &str, timestamp: i64, body: Vec<u8>) -> Signed {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(&body);
    let signature = format!("v0={}", hex(&hmac_sha256(signing_secret.as_bytes(), &base)));
    Signed {
        headers: vec![
            ("content-type", "application/json".into()),
            ("x-slack-request-timestamp", timestamp.to_string()),
            ("x-slack-signature", signature),
        ],
        body,
    }
}

/// Twilio: base64 HMAC-SHA1 over the public URL followed by every parameter name and value,
/// sorted by name.
pub fn twilio(auth_token: &str, public_url: &str, mut params: Vec<(&str, String)>) -> Signed {
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
    let body = serde_urlencoded::to_string(&params).unwrap_or_default();
    Signed {
        headers: vec![
            ("content-type", "application/x-www-form-urlencoded".into()),
            ("x-twilio-signature", signature),
        ],
        body: body.into_bytes(),
    }
}

/// Telegram: the secret token chosen at `setWebhook`, echoed in a header.
pub fn telegram(secret_token: &str, body: Vec<u8>) -> Signed {
    Signed {
        headers: vec![
            ("content-type", "application/json".into()),
            ("x-telegram-bot-api-secret-token", secret_token.into()),
        ],
        body,
    }
}

/// Standard Webhooks (Resend): `v1,` base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed
/// with the base64 part of the `whsec_` secret.
pub fn standard_webhook(
    whsec: &str,
    id: &str,
    timestamp: i64,
    body: Vec<u8>,
) -> Result<Signed, String> {
    let key = STANDARD
        .decode(whsec.trim_start_matches("whsec_"))
        .map_err(|_| "the email webhook_secret is not whsec_<base64>".to_owned())?;
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

    #[test]
    fn slack_signature_matches_slacks_documented_example() {
        // https://api.slack.com/authentication/verifying-requests-from-slack
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c".to_vec();
        let signed = slack("8f742231b10e8888abcd99yyyzzz85a5", 1531420618, body);
        assert_eq!(
            signed.headers[2].1,
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn twilio_signs_url_and_sorted_params() {
        // Twilio's documented example (https://www.twilio.com/docs/usage/security).
        let params = vec![
            ("CallSid", "CA1234567890ABCDE".to_owned()),
            ("Caller", "+12349013030".to_owned()),
            ("Digits", "1234".to_owned()),
            ("From", "+12349013030".to_owned()),
            ("To", "+18005551212".to_owned()),
        ];
        let signed = twilio(
            "12345",
            "https://mycompany.com/myapp.php?foo=1&bar=2",
            params,
        );
        assert_eq!(signed.headers[1].1, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=");
    }
}
