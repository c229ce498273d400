//! Slack, Telegram and email webhooks through [`crate::verify_and_parse`], the function the
//! webhook handler calls. Bodies are signed as each provider signs them, so every input
//! reaches the channel's parser; forged headers exercise the verifiers.

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};
use switchboard_domain::ChannelKind;

use super::edits::{Edit, edits, mutate};
use super::inputs::{bytes, fill, short_text};
use super::{SCALE, SMALL_LEN, config, ratio_config, scales_linearly, timed};
use crate::test_support::{NOW, b64, headers, hmac_sha256, request};
use crate::{InboundError, email, slack, verify_and_parse};

const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TELEGRAM_TOKEN: &str = "s3cr3t-token_value";
const EMAIL_KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
const EMAIL_WEBHOOK_ID: &str = "msg_2abc";

/// Valid payloads of each shape the Slack parser tells apart.
const SLACK: &[&str] = &[
    r#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message","user":"U1","text":"hi there","ts":"1700000000.000100","channel":"D1"}}"#,
    r#"{"type":"event_callback","event_id":"Ev2","event":{"type":"message","user":"U1","text":"in a thread","ts":"1.6","thread_ts":"1.5","channel":"C1"}}"#,
    r#"{"type":"event_callback","event_id":"Ev3","event":{"type":"message","subtype":"message_changed","bot_id":"B1","ts":"1.7","channel":"C1"}}"#,
    r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#,
];

const TELEGRAM: &[&str] = &[
    r#"{"update_id":10001,"message":{"message_id":7,"date":1700000000,"from":{"id":555,"is_bot":false,"first_name":"Ada","last_name":"Lovelace","username":"ada"},"chat":{"id":-100200,"type":"private"},"text":"hello bot"}}"#,
    r#"{"update_id":10002,"message":{"message_id":8,"from":{"id":556,"username":"bob"},"chat":{"id":42,"type":"group"},"photo":[{"file_id":"f"}],"caption":"see this"}}"#,
    r#"{"update_id":10003,"edited_message":{"message_id":7,"from":{"id":555},"chat":{"id":-100200},"text":"edited"}}"#,
];

const EMAIL: &[&str] = &[
    r#"{"type":"email.received","created_at":"2026-02-22T23:41:12.126Z","data":{"email_id":"5676-ff6f","from":"Ada Lovelace <Ada@Example.com>","to":["support@acme.test"],"message_id":"<CAF123@mail.example.com>","subject":"Where is my order?","text":"It has been a week."}}"#,
    r#"{"type":"email.received","data":{"from":"bob@x.io","subject":"Re: hi","headers":{"Message-ID":"<m2@x.io>"},"html":"<p>Thanks &amp; bye</p><style>p{}</style>"}}"#,
    r#"{"type":"email.received","data":{"email_id":"e1","from":{"email":"c@x.io","name":"C"},"headers":[{"name":"message-id","value":"<m3@x.io>"}],"text":" ","html":"<div>hi<br>there</div>"}}"#,
    r#"{"type":"email.delivered","data":{"email_id":"e1","message_id":"<m@x>"}}"#,
];

/// The payloads of the ratio property: one message per channel, and the email bodies that
/// go through HTML-to-text.
const RATIO_BASES: &[(ChannelKind, &str)] = &[
    (ChannelKind::Slack, SLACK[0]),
    (ChannelKind::Telegram, TELEGRAM[0]),
    (ChannelKind::Email, EMAIL[1]),
    (ChannelKind::Email, EMAIL[2]),
];

fn secrets(kind: ChannelKind) -> Value {
    match kind {
        ChannelKind::Slack => json!({"signing_secret": SLACK_SECRET, "bot_token": "xoxb-1"}),
        ChannelKind::Telegram => json!({"bot_token": "123:abc", "secret_token": TELEGRAM_TOKEN}),
        ChannelKind::Email => json!({
            "webhook_secret": format!("whsec_{}", b64(EMAIL_KEY)),
            "api_key": "re_1",
            "from_address": "s@acme.test",
        }),
        ChannelKind::Whatsapp => unreachable!("Twilio's form bodies are in proptests::twilio"),
    }
}

/// The headers the provider would send with `body`.
fn signed_headers(kind: ChannelKind, body: &[u8]) -> HeaderMap {
    let ts = NOW.to_string();
    match kind {
        ChannelKind::Slack => {
            let base = [format!("v0:{ts}:").as_bytes(), body].concat();
            let sig = hex::encode(hmac_sha256(SLACK_SECRET.as_bytes(), &base));
            headers(&[
                ("X-Slack-Request-Timestamp", &ts),
                ("X-Slack-Signature", &format!("v0={sig}")),
            ])
        }
        ChannelKind::Telegram => headers(&[("X-Telegram-Bot-Api-Secret-Token", TELEGRAM_TOKEN)]),
        ChannelKind::Email => {
            let content = [format!("{EMAIL_WEBHOOK_ID}.{ts}.").as_bytes(), body].concat();
            let sig = b64(&hmac_sha256(EMAIL_KEY, &content));
            headers(&[
                ("webhook-id", EMAIL_WEBHOOK_ID),
                ("webhook-timestamp", &ts),
                ("webhook-signature", &format!("v1,{sig}")),
            ])
        }
        ChannelKind::Whatsapp => unreachable!("Twilio's form bodies are in proptests::twilio"),
    }
}

/// Verifies and parses a signed `body` within the time bound. The signature holds, so a
/// refusal can only be the parser's `Malformed`.
fn signed(kind: ChannelKind, body: &[u8]) -> Result<(), TestCaseError> {
    let (h, secrets) = (signed_headers(kind, body), secrets(kind));
    let req = request(&h, body, "https://sb.example.com/webhooks/x/1");
    let got = timed(kind.as_str(), || verify_and_parse(kind, &secrets, &req))?;
    prop_assert!(
        matches!(got, Ok(_) | Err(InboundError::Malformed(_))),
        "a signed {kind} body was refused: {got:?}"
    );
    Ok(())
}

/// Header values as a client may send them: any text, any number, the right timestamp, or
/// up to 64 KB of signatures (Standard Webhooks tries every `v1,` entry in the list).
fn header_value() -> impl Strategy<Value = String> {
    let entry = format!("v1,{} ", b64(&[7; 32]));
    prop_oneof![
        4 => short_text(),
        2 => any::<i64>().prop_map(|n| n.to_string()),
        1 => Just(format!(" {NOW} ")),
        1 => (select(vec![entry, "v0=ab".to_owned()]), 1..=64 * 1024usize)
            .prop_map(|(unit, len)| fill(&unit, len)),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn slack_signed_bytes_never_panic(body in bytes()) {
        signed(ChannelKind::Slack, &body)?;
    }

    #[test]
    fn slack_payload_mutations_never_panic(base in select(SLACK), (edits, cut) in edits()) {
        signed(ChannelKind::Slack, &mutate(base, &edits, cut))?;
    }

    #[test]
    fn telegram_signed_bytes_never_panic(body in bytes()) {
        signed(ChannelKind::Telegram, &body)?;
    }

    #[test]
    fn telegram_update_mutations_never_panic(base in select(TELEGRAM), (edits, cut) in edits()) {
        signed(ChannelKind::Telegram, &mutate(base, &edits, cut))?;
    }

    #[test]
    fn email_signed_bytes_never_panic(body in bytes()) {
        signed(ChannelKind::Email, &body)?;
    }

    #[test]
    fn email_webhook_mutations_never_panic(base in select(EMAIL), (edits, cut) in edits()) {
        signed(ChannelKind::Email, &mutate(base, &edits, cut))?;
    }

    /// Forged or garbled headers: every channel's header names with hostile values (those
    /// `http` accepts at all), against the channel's verifier and the public primitives.
    #[test]
    fn forged_headers_are_refused_without_panic(
        kind in select(&[ChannelKind::Slack, ChannelKind::Telegram, ChannelKind::Email][..]),
        values in vec(header_value(), 6),
        body in bytes(),
    ) {
        let names = [
            "x-slack-request-timestamp", "x-slack-signature", "x-telegram-bot-api-secret-token",
            "webhook-id", "webhook-timestamp", "svix-signature",
        ];
        let mut h = HeaderMap::new();
        for (name, value) in names.iter().zip(&values) {
            if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
                h.insert(HeaderName::from_static(name), value);
            }
        }
        let secrets = secrets(kind);
        let req = request(&h, &body, "https://sb.example.com/webhooks/x/1");
        let got = timed(kind.as_str(), || verify_and_parse(kind, &secrets, &req))?;
        prop_assert!(got.is_err(), "a forged {kind} request was accepted: {got:?}");
        let [ts, sig, secret, id, ..] = &values[..] else { unreachable!("six values") };
        let slack = timed("slack::verify_signature", || {
            slack::verify_signature(secret, ts, &body, sig)
        })?;
        let email = timed("email::verify_signature", || {
            email::verify_signature(secret, id, ts, &body, sig)
        })?;
        prop_assert!(slack.is_err() && email.is_err(), "{:?} {:?}", slack, email);
    }
}

proptest! {
    #![proptest_config(ratio_config())]

    /// One string of a valid payload (a Slack text, an email's `html` or `from`, a
    /// Telegram name...) made of a repeated unit, at two sizes.
    #[test]
    fn json_channels_scale_linearly(
        (kind, base) in select(RATIO_BASES),
        at in any::<usize>(),
        unit in short_text().prop_filter("a unit to repeat", |u| !u.is_empty()),
    ) {
        let signed = |len: usize| {
            let body = mutate(base, &[Edit::Text(at, fill(&unit, len))], None);
            (signed_headers(kind, &body), body)
        };
        let (small, large) = (signed(SMALL_LEN), signed(SMALL_LEN * SCALE));
        let secrets = secrets(kind);
        scales_linearly(kind.as_str(), &small, &large, |(h, body)| {
            verify_and_parse(kind, &secrets, &request(h, body, "u"))
        })?;
    }
}

/// The bases are what the properties claim: valid, signed payloads the parsers accept.
#[test]
fn bases_are_accepted() {
    for (kind, bases) in [
        (ChannelKind::Slack, SLACK),
        (ChannelKind::Telegram, TELEGRAM),
        (ChannelKind::Email, EMAIL),
    ] {
        for base in bases {
            let h = signed_headers(kind, base.as_bytes());
            let req = request(&h, base.as_bytes(), "u");
            let got = verify_and_parse(kind, &secrets(kind), &req);
            assert!(got.is_ok(), "{kind} {base}: {got:?}");
        }
    }
}
