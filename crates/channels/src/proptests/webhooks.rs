//! The JSON webhooks (Slack, Telegram, email) across channels: forged headers against every
//! verifier, and each parser's time on a growing string. Each channel's own properties,
//! with its payloads and how its provider signs them, are in its folder
//! (`slack/proptests.rs`, …); WhatsApp's form bodies are in `whatsapp/proptests.rs`.

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;
use switchboard_domain::ChannelKind;

use super::edits::{Edit, mutate};
use super::inputs::{bytes, fill, short_text};
use super::{SCALE, SMALL_LEN, config, ratio_config, scales_linearly, timed};
use crate::test_support::{NOW, b64, request};
use crate::{InboundError, email, slack, telegram, verify_and_parse};

/// The payloads of the ratio property: one message per channel, and the email bodies that
/// go through HTML-to-text.
const RATIO_BASES: &[(ChannelKind, &str)] = &[
    (ChannelKind::Slack, slack::proptests::BASES[0]),
    (ChannelKind::Telegram, telegram::proptests::BASES[0]),
    (ChannelKind::Email, email::proptests::BASES[1]),
    (ChannelKind::Email, email::proptests::BASES[2]),
];

fn secrets(kind: ChannelKind) -> Value {
    match kind {
        ChannelKind::Slack => slack::proptests::secrets(),
        ChannelKind::Telegram => telegram::proptests::secrets(),
        ChannelKind::Email => email::proptests::secrets(),
        ChannelKind::Whatsapp => unreachable!("WhatsApp's form bodies are in whatsapp::proptests"),
    }
}

/// The headers the provider would send with `body`.
fn signed_headers(kind: ChannelKind, body: &[u8]) -> HeaderMap {
    match kind {
        ChannelKind::Slack => slack::proptests::signed_headers(body),
        ChannelKind::Telegram => telegram::proptests::signed_headers(body),
        ChannelKind::Email => email::proptests::signed_headers(body),
        ChannelKind::Whatsapp => unreachable!("WhatsApp's form bodies are in whatsapp::proptests"),
    }
}

/// Verifies and parses a signed `body` within the time bound. The signature holds, so a
/// refusal can only be the parser's `Malformed`.
pub(crate) fn signed(kind: ChannelKind, body: &[u8]) -> Result<(), TestCaseError> {
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
        (ChannelKind::Slack, slack::proptests::BASES),
        (ChannelKind::Telegram, telegram::proptests::BASES),
        (ChannelKind::Email, email::proptests::BASES),
    ] {
        for base in bases {
            let h = signed_headers(kind, base.as_bytes());
            let req = request(&h, base.as_bytes(), "u");
            let got = verify_and_parse(kind, &secrets(kind), &req);
            assert!(got.is_ok(), "{kind} {base}: {got:?}");
        }
    }
}
