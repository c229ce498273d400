//! WhatsApp/SMS through Twilio: form bodies, decoded before the signature can be checked
//! (Twilio signs the decoded parameters), so the form decoder meets unauthenticated bytes.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};
use switchboard_domain::ChannelKind;

use crate::proptests::inputs::{MAX_LEN, bytes, short_text};
use crate::proptests::{SCALE, SMALL_LEN, config, ratio_config, scales_linearly, timed};
use crate::test_support::{b64, headers, hmac_sha1, request};
use crate::{InboundError, verify_and_parse};

const URL: &str = "https://sb.example.com/webhooks/whatsapp/42?x=1";
const TOKEN: &str = "tok_secret";

/// A valid inbound message, one parameter at a time, encoded as Twilio sends it.
const VALID: &[&str] = &[
    "MessageSid=SM123",
    "AccountSid=AC1",
    "From=whatsapp%3A%2B14155550100",
    "To=whatsapp%3A%2B1555",
    "Body=Hello+%26+welcome%3F+100%25",
    "ProfileName=Ada+L",
];

/// The names the parser looks up, and near misses.
#[rustfmt::skip]
const KEYS: &[&str] = &[
    "MessageSid", "AccountSid", "From", "To", "Body", "ProfileName", "NumMedia", "", "body",
    "Body[]", "Message%53id",
];

/// Bytes that break form decoders: bad and truncated `%` escapes, raw bytes that are not
/// UTF-8 (a cut-off sequence, an encoded surrogate), separators inside values.
#[rustfmt::skip]
const HOSTILE: &[&[u8]] = &[
    b"%", b"%G1", b"%e2%82", b"%ff%fe", b"%00", b"%ed%a0%80", b"%c3%a9", b"%25", b"%%%", b"%2B",
    b"\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xc3", b"\xff", b"\0", b"+", b"=", b"==",
    b";", b"&", b"a", b"SM1", b"AC1",
];

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => vec(select(HOSTILE), 0..16).prop_map(|p| p.concat()),
        2 => short_text().prop_map(String::into_bytes),
        1 => (vec(select(HOSTILE), 1..4), 1..=MAX_LEN)
            .prop_map(|(unit, len)| unit.concat().into_iter().cycle().take(len).collect()),
    ]
}

/// One `name=value` pair of the body: a valid one, a known name with a hostile value
/// (repeated names come from picking a name twice), or junk.
fn pair() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => select(VALID).prop_map(|p| p.as_bytes().to_vec()),
        3 => (select(KEYS), value()).prop_map(|(k, v)| [k.as_bytes(), b"=", &v].concat()),
        1 => value(),
    ]
}

/// A form body: a few pairs, or one pair repeated up to [`MAX_LEN`] (tens of thousands of
/// parameters, most with the same name); then maybe cut at some byte.
fn form_body() -> impl Strategy<Value = Vec<u8>> {
    let body = prop_oneof![
        6 => vec(pair(), 0..12).prop_map(|pairs| pairs.join(&b'&')),
        1 => (pair(), 1..=MAX_LEN).prop_map(|(pair, len)| {
            [&pair[..], b"&"].concat().into_iter().cycle().take(len).collect()
        }),
    ];
    (body, option::weighted(0.2, any::<usize>())).prop_map(|(mut body, cut)| {
        if let Some(cut) = cut {
            body.truncate(cut % (body.len() + 1));
        }
        body
    })
}

fn secrets() -> Value {
    json!({"account_sid": "AC1", "auth_token": TOKEN, "from_number": "whatsapp:+1555"})
}

/// The header Twilio would send with `body`: the URL and the decoded parameters, sorted.
fn signature_headers(body: &[u8]) -> http::HeaderMap {
    let mut params: Vec<(String, String)> = serde_urlencoded::from_bytes(body).unwrap_or_default();
    params.sort();
    let mut data = URL.as_bytes().to_vec();
    for (name, value) in &params {
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(value.as_bytes());
    }
    headers(&[(
        "X-Twilio-Signature",
        &b64(&hmac_sha1(TOKEN.as_bytes(), &data)),
    )])
}

/// Signs `body` as Twilio does, and verifies and parses it within the time bound. A refusal
/// other than `Malformed` is only right for another account's request.
fn signed(body: &[u8]) -> Result<(), TestCaseError> {
    let h = signature_headers(body);
    let (secrets, req) = (secrets(), request(&h, body, URL));
    let got = timed("twilio", || {
        verify_and_parse(ChannelKind::Whatsapp, &secrets, &req)
    })?;
    let params: Vec<(String, String)> = serde_urlencoded::from_bytes(body).unwrap_or_default();
    let other_account = params
        .iter()
        .find(|(name, _)| name == "AccountSid")
        .is_some_and(|(_, sid)| sid != "AC1");
    if other_account {
        prop_assert_eq!(got, Err(InboundError::BadSignature));
    } else {
        prop_assert!(
            matches!(got, Ok(_) | Err(InboundError::Malformed(_))),
            "a signed form was refused: {:?}",
            got
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn twilio_signed_bytes_never_panic(body in bytes()) {
        signed(&body)?;
    }

    #[test]
    fn twilio_form_mutations_never_panic(body in form_body()) {
        signed(&body)?;
    }

    /// Unsigned or wrongly signed forms, through the verifier and the public primitive.
    #[test]
    fn twilio_forged_signatures_are_refused_without_panic(
        signature in short_text(),
        url in short_text(),
        body in form_body(),
    ) {
        let mut h = headers(&[]);
        if let Ok(value) = http::HeaderValue::from_bytes(signature.as_bytes()) {
            h.insert("x-twilio-signature", value);
        }
        let (secrets, req) = (secrets(), request(&h, &body, &url));
        let got = timed("twilio", || verify_and_parse(ChannelKind::Whatsapp, &secrets, &req))?;
        prop_assert!(got.is_err(), "a forged form was accepted: {:?}", got);
        let params: Vec<(String, String)> =
            serde_urlencoded::from_bytes(&body).unwrap_or_default();
        let primitive = timed("twilio::verify_signature", || {
            super::verify_signature(TOKEN, &url, &params, &signature)
        })?;
        prop_assert!(primitive.is_err(), "a forged signature matched");
    }
}

proptest! {
    #![proptest_config(ratio_config())]

    /// One parameter repeated to fill the body: thousands of parameters, most of them with
    /// one name, at two sizes.
    #[test]
    fn twilio_forms_scale_linearly(pair in pair()) {
        let signed = |len: usize| {
            let body: Vec<u8> = [&pair[..], b"&"].concat().into_iter().cycle().take(len).collect();
            (signature_headers(&body), body)
        };
        let (small, large) = (signed(SMALL_LEN), signed(SMALL_LEN * SCALE));
        let secrets = secrets();
        scales_linearly("twilio", &small, &large, |(h, body)| {
            verify_and_parse(ChannelKind::Whatsapp, &secrets, &request(h, body, URL))
        })?;
    }
}

/// The base is what the properties claim: a valid form, signed as Twilio signs it.
#[test]
fn twilio_base_is_accepted() {
    signed(VALID.join("&").as_bytes()).expect("accepted");
    let body = VALID.join("&");
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(&body).expect("a form");
    let mut sorted = pairs;
    sorted.sort();
    let data: String = sorted.iter().map(|(n, v)| format!("{n}{v}")).collect();
    let sig = b64(&hmac_sha1(
        TOKEN.as_bytes(),
        format!("{URL}{data}").as_bytes(),
    ));
    let h = headers(&[("X-Twilio-Signature", &sig)]);
    let got = verify_and_parse(
        ChannelKind::Whatsapp,
        &secrets(),
        &request(&h, body.as_bytes(), URL),
    );
    let event = crate::test_support::event(got.expect("verified"));
    assert_eq!(
        event.message.expect("a message").text,
        "Hello & welcome? 100%"
    );
}
