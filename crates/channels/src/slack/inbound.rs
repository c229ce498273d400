//! Slack Events API, inbound: `v0` request signing and `event_callback` parsing.

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::inbound::{
    Channel, InboundError, InboundEvent, InboundMessage, InboundRequest, Verified, check_fresh,
    header, json_body, lenient, req_str, secret,
};

/// The Slack channel.
pub struct Slack;

/// Checks `v0=` + hex HMAC-SHA256(signing_secret, `v0:{timestamp}:{body}`). Public so the
/// primitive can be tested against Slack's published example, whose body is not JSON.
pub fn verify_signature(
    signing_secret: &str,
    timestamp: &str,
    body: &[u8],
    signature: &str,
) -> Result<(), InboundError> {
    let hex_sig = signature
        .strip_prefix("v0=")
        .ok_or(InboundError::BadSignature)?;
    let expected = hex::decode(hex_sig).map_err(|_| InboundError::BadSignature)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes())
        .map_err(|_| InboundError::Secret("signing_secret"))?;
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    // verify_slice compares in constant time.
    mac.verify_slice(&expected)
        .map_err(|_| InboundError::BadSignature)
}

impl Channel for Slack {
    fn secret_fields(&self) -> &'static [&'static str] {
        &["signing_secret", "bot_token"]
    }

    fn inbound_secret_field(&self) -> &'static str {
        "signing_secret"
    }

    fn verify(&self, secrets: &Value, req: &InboundRequest<'_>) -> Result<(), InboundError> {
        let signing_secret = secret(secrets, "signing_secret")?;
        let (Some(timestamp), Some(signature)) = (
            header(req, "x-slack-request-timestamp"),
            header(req, "x-slack-signature"),
        ) else {
            return Err(InboundError::MissingSignature);
        };
        check_fresh(timestamp, req.now_unix)?;
        verify_signature(signing_secret, timestamp, req.body, signature)
    }

    /// Only `url_verification` and `event_callback` are understood; anything else (e.g.
    /// `app_rate_limited`, which carries no event id to dedup on) is `Malformed`, as is an
    /// `event_callback` without `event_id`.
    fn parse(&self, req: &InboundRequest<'_>) -> Result<Verified, InboundError> {
        let payload = json_body(req.body)?;
        match req_str(&payload, "/type")? {
            "url_verification" => Ok(Verified::Challenge(
                req_str(&payload, "/challenge")?.to_owned(),
            )),
            "event_callback" => {
                let dedup_key = req_str(&payload, "/event_id")?.to_owned();
                let message = lenient("slack", &dedup_key, message(&payload));
                Ok(Verified::Event(InboundEvent {
                    dedup_key,
                    message,
                    payload,
                }))
            }
            other => Err(InboundError::Malformed(format!(
                "unsupported slack type {other}"
            ))),
        }
    }
}

/// Only plain user messages need a reply: bot posts (including our own replies, which Slack
/// echoes back) and subtypes (edits, deletes, joins) would otherwise loop or double-answer.
fn message(payload: &Value) -> Result<Option<InboundMessage>, InboundError> {
    let event = &payload["event"];
    if event["type"] != "message" || !event["bot_id"].is_null() || !event["subtype"].is_null() {
        return Ok(None);
    }
    let channel = req_str(event, "/channel")?;
    let ts = req_str(event, "/ts")?;
    // Replies go into the thread the customer wrote in, or start one on their message.
    let thread_ts = event["thread_ts"].as_str().unwrap_or(ts);
    Ok(Some(InboundMessage {
        customer_external_id: req_str(event, "/user")?.to_owned(),
        customer_name: None,
        text: event["text"].as_str().unwrap_or_default().to_owned(),
        channel_message_id: format!("{channel}:{ts}"),
        reply_to: json!({"channel": channel, "thread_ts": thread_ts}),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{NOW, event, headers, hmac_sha256, request};

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

    fn secrets() -> Value {
        json!({"signing_secret": SECRET, "bot_token": "xoxb-1"})
    }

    fn signed(secret: &str, ts: i64, body: &str) -> http::HeaderMap {
        let base = format!("v0:{ts}:{body}");
        let sig = format!(
            "v0={}",
            hex::encode(hmac_sha256(secret.as_bytes(), base.as_bytes()))
        );
        headers(&[
            ("X-Slack-Request-Timestamp", &ts.to_string()),
            ("X-Slack-Signature", &sig),
        ])
    }

    fn run(h: &http::HeaderMap, body: &str) -> Result<Verified, InboundError> {
        crate::verify_and_parse(
            switchboard_domain::ChannelKind::Slack,
            &secrets(),
            &request(h, body.as_bytes(), "https://x/webhooks/slack/1"),
        )
    }

    const MSG: &str = concat!(
        r#"{"type":"event_callback","event_id":"Ev1","#,
        r#""event":{"type":"message","user":"U1","text":"hi there","ts":"1700000000.000100","channel":"D1"}}"#
    );

    #[test]
    fn slack_docs_example_signature() {
        let body = crate::test_support::SLACK_DOCS_BODY;
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(
            verify_signature(SECRET, "1531420618", body.as_bytes(), sig),
            Ok(())
        );
        let wrong = verify_signature(SECRET, "1531420619", body.as_bytes(), sig);
        assert_eq!(wrong, Err(InboundError::BadSignature));
    }

    #[test]
    fn valid_message_is_parsed() {
        let e = event(run(&signed(SECRET, NOW, MSG), MSG).expect("verified"));
        assert_eq!(e.dedup_key, "Ev1");
        assert_eq!(e.payload["event"]["text"], "hi there");
        let m = e.message.expect("message");
        assert_eq!(m.customer_external_id, "U1");
        assert_eq!(m.text, "hi there");
        assert_eq!(m.channel_message_id, "D1:1700000000.000100");
        assert_eq!(
            m.reply_to,
            json!({"channel": "D1", "thread_ts": "1700000000.000100"})
        );
    }

    #[test]
    fn thread_reply_keeps_thread() {
        let body = MSG.replace(r#""channel":"D1""#, r#""channel":"D1","thread_ts":"1.5""#);
        let e = event(run(&signed(SECRET, NOW, &body), &body).expect("verified"));
        assert_eq!(e.message.expect("message").reply_to["thread_ts"], "1.5");
    }

    #[test]
    fn tampered_body_and_wrong_secret_are_refused() {
        let tampered = MSG.replace("hi there", "hi thera");
        assert_eq!(
            run(&signed(SECRET, NOW, MSG), &tampered),
            Err(InboundError::BadSignature)
        );
        assert_eq!(
            run(&signed("other", NOW, MSG), MSG),
            Err(InboundError::BadSignature)
        );
        let garbled = headers(&[
            ("X-Slack-Request-Timestamp", &NOW.to_string()),
            ("X-Slack-Signature", "v0=zz"),
        ]);
        assert_eq!(run(&garbled, MSG), Err(InboundError::BadSignature));
    }

    #[test]
    fn missing_headers_are_refused() {
        let only_ts = headers(&[("X-Slack-Request-Timestamp", &NOW.to_string())]);
        assert_eq!(run(&only_ts, MSG), Err(InboundError::MissingSignature));
        assert_eq!(run(&headers(&[]), MSG), Err(InboundError::MissingSignature));
    }

    #[test]
    fn stale_timestamps_are_refused_both_ways() {
        assert_eq!(
            run(&signed(SECRET, NOW - 301, MSG), MSG),
            Err(InboundError::StaleTimestamp)
        );
        assert_eq!(
            run(&signed(SECRET, NOW + 301, MSG), MSG),
            Err(InboundError::StaleTimestamp)
        );
        assert!(run(&signed(SECRET, NOW - 300, MSG), MSG).is_ok());
    }

    #[test]
    fn signed_garbage_is_malformed() {
        let body = "not json {";
        assert!(matches!(
            run(&signed(SECRET, NOW, body), body),
            Err(InboundError::Malformed(_))
        ));
        let no_id = r#"{"type":"event_callback","event":{"type":"message"}}"#;
        assert!(matches!(
            run(&signed(SECRET, NOW, no_id), no_id),
            Err(InboundError::Malformed(_))
        ));
        // A sound envelope with a broken message is kept, without a message.
        let no_user = MSG.replace(r#""user":"U1","#, "");
        let e = event(run(&signed(SECRET, NOW, &no_user), &no_user).expect("kept"));
        assert_eq!((e.dedup_key.as_str(), e.message), ("Ev1", None));
    }

    #[test]
    fn url_verification_answers_the_challenge() {
        let body = r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        let got = run(&signed(SECRET, NOW, body), body).expect("verified");
        assert_eq!(
            got,
            Verified::Challenge("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into())
        );
        // The handshake is verified like everything else.
        assert_eq!(
            run(&signed("other", NOW, body), body),
            Err(InboundError::BadSignature)
        );
    }

    #[test]
    fn bot_and_subtype_messages_need_no_processing() {
        for body in [
            MSG.replace(r#""user":"U1""#, r#""user":"U1","bot_id":"B1""#),
            MSG.replace(
                r#""user":"U1""#,
                r#""user":"U1","subtype":"message_changed""#,
            ),
        ] {
            let e = event(run(&signed(SECRET, NOW, &body), &body).expect("verified"));
            assert_eq!(e.dedup_key, "Ev1");
            assert_eq!(e.message, None);
        }
    }
}
