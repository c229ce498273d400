//! WhatsApp through Twilio, inbound: `X-Twilio-Signature` checking and form parsing.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha1::Sha1;

use crate::inbound::{
    Channel, InboundError, InboundEvent, InboundMessage, InboundRequest, Verified, header, lenient,
    secret,
};

/// The WhatsApp-through-Twilio channel.
pub struct Whatsapp;

/// Decodes the form body. Twilio signs the decoded parameters, not the bytes, so unlike
/// the other channels the body has to be decoded before the signature can be checked.
fn form(body: &[u8]) -> Result<Vec<(String, String)>, InboundError> {
    serde_urlencoded::from_bytes(body)
        .map_err(|_| InboundError::Malformed("body is not x-www-form-urlencoded".into()))
}

/// Checks base64(HMAC-SHA1(auth_token, url + name1 + value1 + …)) with the parameters
/// sorted by name (then value, for repeated names, as Twilio's own validators do). Public
/// so the primitive can be tested against Twilio's published example.
pub fn verify_signature(
    auth_token: &str,
    url: &str,
    params: &[(String, String)],
    signature: &str,
) -> Result<(), InboundError> {
    let expected = STANDARD
        .decode(signature.trim())
        .map_err(|_| InboundError::BadSignature)?;
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut mac = Hmac::<Sha1>::new_from_slice(auth_token.as_bytes())
        .map_err(|_| InboundError::Secret("auth_token"))?;
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    mac.verify_slice(&expected)
        .map_err(|_| InboundError::BadSignature)
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

impl Channel for Whatsapp {
    fn secret_fields(&self) -> &'static [&'static str] {
        &["account_sid", "auth_token", "from_number"]
    }

    fn inbound_secret_field(&self) -> &'static str {
        "auth_token"
    }

    /// After the signature, an `AccountSid` that differs from the connection's is refused
    /// as `BadSignature`: the request is authentic for some account, but not for this
    /// connection, and answering 401 keeps a misrouted webhook from entering the wrong inbox.
    fn verify(&self, secrets: &Value, req: &InboundRequest<'_>) -> Result<(), InboundError> {
        let auth_token = secret(secrets, "auth_token")?;
        let signature =
            header(req, super::SIGNATURE_HEADER).ok_or(InboundError::MissingSignature)?;
        let params = form(req.body)?;
        verify_signature(auth_token, req.public_url, &params, signature)?;
        let account_sid = secret(secrets, "account_sid")?;
        match param(&params, "AccountSid") {
            Some(sid) if sid != account_sid => Err(InboundError::BadSignature),
            _ => Ok(()),
        }
    }

    /// A request without `Body` (a delivery-status callback pointed at this URL) is stored
    /// with no message; a media-only message has an empty `Body` and is kept as a message.
    fn parse(&self, req: &InboundRequest<'_>) -> Result<Verified, InboundError> {
        let params = form(req.body)?;
        let required = |name: &str| {
            param(&params, name)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| InboundError::Malformed(format!("missing form field {name}")))
        };
        let sid = required("MessageSid")?;
        let message = match param(&params, "Body") {
            None => Ok(None),
            Some(text) => required("From").map(|from| {
                Some(InboundMessage {
                    customer_external_id: from.to_owned(),
                    customer_name: param(&params, "ProfileName")
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned),
                    text: text.to_owned(),
                    channel_message_id: sid.to_owned(),
                    reply_to: json!({"to": from}),
                })
            }),
        };
        let message = lenient("whatsapp", sid, message);
        let payload: Map<String, Value> = params
            .iter()
            .map(|(n, v)| (n.clone(), Value::String(v.clone())))
            .collect();
        Ok(Verified::Event(InboundEvent {
            dedup_key: sid.to_owned(),
            message,
            payload: Value::Object(payload),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{b64, event, headers, hmac_sha1, request};
    use switchboard_domain::ChannelKind;

    const URL: &str = "https://sb.example.com/webhooks/whatsapp/42?x=1";
    const TOKEN: &str = "tok_secret";

    fn secrets() -> Value {
        json!({"account_sid": "AC1", "auth_token": TOKEN, "from_number": "whatsapp:+1555"})
    }

    /// Signs the way Twilio documents it: URL, then each name+value sorted by name.
    fn sign(token: &str, url: &str, pairs: &[(&str, &str)]) -> String {
        let mut sorted = pairs.to_vec();
        sorted.sort();
        let mut data = url.to_owned();
        for (n, v) in sorted {
            data.push_str(n);
            data.push_str(v);
        }
        b64(&hmac_sha1(token.as_bytes(), data.as_bytes()))
    }

    fn encode(pairs: &[(&str, &str)]) -> String {
        serde_urlencoded::to_string(pairs).expect("encodes")
    }

    const MSG: &[(&str, &str)] = &[
        ("MessageSid", "SM123"),
        ("AccountSid", "AC1"),
        ("From", "whatsapp:+14155550100"),
        ("To", "whatsapp:+1555"),
        ("Body", "Hello & welcome? 100%"),
        ("ProfileName", "Ada L"),
    ];

    fn run(sig: Option<&str>, body: &str) -> Result<Verified, InboundError> {
        let h = match sig {
            Some(s) => headers(&[("X-Twilio-Signature", s)]),
            None => headers(&[]),
        };
        crate::verify_and_parse(
            ChannelKind::Whatsapp,
            &secrets(),
            &request(&h, body.as_bytes(), URL),
        )
    }

    #[test]
    fn twilio_docs_example_signature() {
        let params: Vec<(String, String)> = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+12349013030"),
            ("Digits", "1234"),
            ("From", "+12349013030"),
            ("To", "+18005551212"),
        ]
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        let sig = "0/KCTR6DLpKmkAf8muzZqo1nDgQ=";
        assert_eq!(verify_signature("12345", url, &params, sig), Ok(()));
        assert_eq!(
            verify_signature("12346", url, &params, sig),
            Err(InboundError::BadSignature)
        );
    }

    #[test]
    fn valid_message_is_parsed() {
        let e = event(run(Some(&sign(TOKEN, URL, MSG)), &encode(MSG)).expect("verified"));
        assert_eq!(e.dedup_key, "SM123");
        assert_eq!(e.payload["To"], "whatsapp:+1555");
        let m = e.message.expect("message");
        assert_eq!(m.customer_external_id, "whatsapp:+14155550100");
        assert_eq!(m.customer_name.as_deref(), Some("Ada L"));
        assert_eq!(m.text, "Hello & welcome? 100%");
        assert_eq!(m.channel_message_id, "SM123");
        assert_eq!(m.reply_to, json!({"to": "whatsapp:+14155550100"}));
    }

    #[test]
    fn parameter_order_does_not_matter() {
        let mut reversed = MSG.to_vec();
        reversed.reverse();
        let sig = sign(TOKEN, URL, MSG);
        assert!(run(Some(&sig), &encode(&reversed)).is_ok());
    }

    #[test]
    fn tampering_and_wrong_secrets_are_refused() {
        let sig = sign(TOKEN, URL, MSG);
        let tampered = encode(MSG).replace("welcome", "welcomf");
        assert_eq!(run(Some(&sig), &tampered), Err(InboundError::BadSignature));
        let wrong = sign("other", URL, MSG);
        assert_eq!(
            run(Some(&wrong), &encode(MSG)),
            Err(InboundError::BadSignature)
        );
        // The URL is signed too: a request replayed to another connection fails.
        let other_url = sign(
            TOKEN,
            "https://sb.example.com/webhooks/whatsapp/43?x=1",
            MSG,
        );
        assert_eq!(
            run(Some(&other_url), &encode(MSG)),
            Err(InboundError::BadSignature)
        );
        assert_eq!(
            run(Some("%%%"), &encode(MSG)),
            Err(InboundError::BadSignature)
        );
    }

    #[test]
    fn other_account_is_refused() {
        let mut other = MSG.to_vec();
        other[1] = ("AccountSid", "AC2");
        let sig = sign(TOKEN, URL, &other);
        assert_eq!(
            run(Some(&sig), &encode(&other)),
            Err(InboundError::BadSignature)
        );
    }

    #[test]
    fn missing_header_is_refused() {
        assert_eq!(run(None, &encode(MSG)), Err(InboundError::MissingSignature));
    }

    #[test]
    fn signed_garbage_is_malformed() {
        let garbage: &[(&str, &str)] = &[("{\"not\"", "a form}")];
        let sig = sign(TOKEN, URL, garbage);
        assert!(matches!(
            run(Some(&sig), &encode(garbage)),
            Err(InboundError::Malformed(_))
        ));
    }

    #[test]
    fn status_callback_needs_no_processing() {
        let status: &[(&str, &str)] = &[
            ("MessageSid", "SM9"),
            ("AccountSid", "AC1"),
            ("MessageStatus", "delivered"),
        ];
        let e = event(run(Some(&sign(TOKEN, URL, status)), &encode(status)).expect("verified"));
        assert_eq!((e.dedup_key.as_str(), e.message), ("SM9", None));
    }
}
