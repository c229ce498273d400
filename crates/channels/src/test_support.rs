//! Test helpers that sign requests the way each provider does, with `hmac` directly and no
//! code from the modules under test, so a bug in a verifier cannot also hide in its tests.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::inbound::{InboundEvent, InboundRequest, Verified};

/// A fixed "now" for every test.
pub const NOW: i64 = 1_700_000_000;

/// The body of Slack's documented example of a signed request
/// (<https://api.slack.com/authentication/verifying-requests-from-slack>), signed at
/// 1531420618 with the secret `8f742231b10e8888abcd99yyyzzz85a5`.
pub const SLACK_DOCS_BODY: &str = concat!(
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow",
    "&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner",
    "&command=%2Fwebhook-collect&text=",
    "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN",
    "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
);

pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
    mac.update(msg);
    mac.finalize().into_bytes().to_vec()
}

pub fn hmac_sha1(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(key).expect("any key length");
    mac.update(msg);
    mac.finalize().into_bytes().to_vec()
}

pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

pub fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_str(value).expect("header value"),
        );
    }
    map
}

pub fn request<'a>(headers: &'a HeaderMap, body: &'a [u8], url: &'a str) -> InboundRequest<'a> {
    InboundRequest {
        headers,
        body,
        public_url: url,
        now_unix: NOW,
    }
}

pub fn event(verified: Verified) -> InboundEvent {
    match verified {
        Verified::Event(event) => event,
        Verified::Challenge(c) => panic!("expected an event, got challenge {c}"),
    }
}
