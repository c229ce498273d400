//! Test helpers that sign requests the way each provider does, with `hmac` directly and no
//! code from the modules under test, so a bug in a verifier cannot also hide in its tests.

use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::inbound::{InboundEvent, InboundRequest, Verified};

/// A fixed "now" for every test.
pub const NOW: i64 = 1_700_000_000;

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
