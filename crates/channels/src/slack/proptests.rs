//! Slack's webhooks through [`crate::verify_and_parse`], the function the webhook handler
//! calls, signed as Slack signs them so every input reaches the parser.

use http::HeaderMap;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};
use switchboard_domain::ChannelKind;

use crate::proptests::config;
use crate::proptests::edits::{edits, mutate};
use crate::proptests::inputs::bytes;
use crate::proptests::webhooks::signed;
use crate::test_support::{NOW, headers, hmac_sha256};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Valid payloads of each shape the Slack parser tells apart.
pub(crate) const BASES: &[&str] = &[
    r#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message","user":"U1","text":"hi there","ts":"1700000000.000100","channel":"D1"}}"#,
    r#"{"type":"event_callback","event_id":"Ev2","event":{"type":"message","user":"U1","text":"in a thread","ts":"1.6","thread_ts":"1.5","channel":"C1"}}"#,
    r#"{"type":"event_callback","event_id":"Ev3","event":{"type":"message","subtype":"message_changed","bot_id":"B1","ts":"1.7","channel":"C1"}}"#,
    r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#,
];

/// The connection's secrets.
pub(crate) fn secrets() -> Value {
    json!({"signing_secret": SECRET, "bot_token": "xoxb-1"})
}

/// The headers Slack would send with `body`.
pub(crate) fn signed_headers(body: &[u8]) -> HeaderMap {
    let ts = NOW.to_string();
    let base = [format!("v0:{ts}:").as_bytes(), body].concat();
    let sig = hex::encode(hmac_sha256(SECRET.as_bytes(), &base));
    headers(&[
        ("X-Slack-Request-Timestamp", &ts),
        ("X-Slack-Signature", &format!("v0={sig}")),
    ])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn slack_signed_bytes_never_panic(body in bytes()) {
        signed(ChannelKind::Slack, &body)?;
    }

    #[test]
    fn slack_payload_mutations_never_panic(base in select(BASES), (edits, cut) in edits()) {
        signed(ChannelKind::Slack, &mutate(base, &edits, cut))?;
    }
}
