use super::*;
use crate::test_support::{NOW, b64, event, headers, hmac_sha256, request};
use switchboard_domain::ChannelKind;

/// 32 bytes of key, given to the connection as `whsec_<base64>`.
const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
const WEBHOOK_ID: &str = "msg_2abc";

/// A received email with a text body, the first of the property tests' shapes.
const RECEIVED: &str = crate::email::proptests::BASES[0];

fn secrets() -> Value {
    json!({"webhook_secret": format!("whsec_{}", b64(KEY)), "api_key": "re_1", "from_address": "s@acme.test"})
}

/// Signs as the Standard Webhooks spec describes: `{id}.{ts}.{body}` with the raw key.
fn sig(key: &[u8], ts: i64, body: &str) -> String {
    let content = format!("{WEBHOOK_ID}.{ts}.{body}");
    format!("v1,{}", b64(&hmac_sha256(key, content.as_bytes())))
}

fn signed(prefix: &str, ts: i64, signature: &str) -> http::HeaderMap {
    let ts = ts.to_string();
    headers(&[
        (&format!("{prefix}-id"), WEBHOOK_ID),
        (&format!("{prefix}-timestamp"), &ts),
        (&format!("{prefix}-signature"), signature),
    ])
}

fn run(h: &http::HeaderMap, body: &str) -> Result<Verified, InboundError> {
    crate::verify_and_parse(
        ChannelKind::Email,
        &secrets(),
        &request(h, body.as_bytes(), "u"),
    )
}

fn ok(body: &str) -> InboundEvent {
    event(run(&signed("webhook", NOW, &sig(KEY, NOW, body)), body).expect("verified"))
}

#[test]
fn standard_webhooks_spec_example() {
    let got = verify_signature(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "1614265330",
        br#"{"test": 2432232314}"#,
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    );
    assert_eq!(got, Ok(()));
}

#[test]
fn valid_email_is_parsed() {
    let e = ok(RECEIVED);
    assert_eq!(e.dedup_key, "<CAF123@mail.example.com>");
    assert_eq!(e.payload["data"]["email_id"], "5676-ff6f");
    let m = e.message.expect("message");
    assert_eq!(m.customer_external_id, "ada@example.com");
    assert_eq!(m.customer_name.as_deref(), Some("Ada Lovelace"));
    assert_eq!(m.text, "It has been a week.");
    assert_eq!(m.channel_message_id, "<CAF123@mail.example.com>");
    let want = json!({"to": "ada@example.com", "subject": "Re: Where is my order?", "in_reply_to": "<CAF123@mail.example.com>"});
    assert_eq!(m.reply_to, want);
}

#[test]
fn svix_headers_are_accepted() {
    let h = signed("svix", NOW, &sig(KEY, NOW, RECEIVED));
    assert!(run(&h, RECEIVED).is_ok());
}

#[test]
fn any_listed_signature_may_match() {
    let both = format!("v1,{} v2,abc {}", b64(&[0u8; 32]), sig(KEY, NOW, RECEIVED));
    assert!(run(&signed("webhook", NOW, &both), RECEIVED).is_ok());
    let none = format!(
        "v1,{} {}",
        b64(&[0u8; 32]),
        sig(b"another key", NOW, RECEIVED)
    );
    assert_eq!(
        run(&signed("webhook", NOW, &none), RECEIVED),
        Err(InboundError::BadSignature)
    );
}

#[test]
fn tampering_and_wrong_secret_are_refused() {
    let good = sig(KEY, NOW, RECEIVED);
    let tampered = RECEIVED.replace("a week", "a month");
    assert_eq!(
        run(&signed("webhook", NOW, &good), &tampered),
        Err(InboundError::BadSignature)
    );
    let wrong = sig(b"not the key", NOW, RECEIVED);
    assert_eq!(
        run(&signed("webhook", NOW, &wrong), RECEIVED),
        Err(InboundError::BadSignature)
    );
    // The timestamp is signed: moving it invalidates the signature.
    assert_eq!(
        run(&signed("webhook", NOW + 1, &good), RECEIVED),
        Err(InboundError::BadSignature)
    );
}

#[test]
fn missing_headers_are_refused() {
    let h = headers(&[("webhook-id", WEBHOOK_ID), ("webhook-timestamp", "1")]);
    assert_eq!(run(&h, RECEIVED), Err(InboundError::MissingSignature));
    assert_eq!(
        run(&headers(&[]), RECEIVED),
        Err(InboundError::MissingSignature)
    );
}

#[test]
fn stale_timestamps_are_refused_both_ways() {
    for ts in [NOW - 301, NOW + 301] {
        let h = signed("webhook", ts, &sig(KEY, ts, RECEIVED));
        assert_eq!(run(&h, RECEIVED), Err(InboundError::StaleTimestamp));
    }
}

#[test]
fn signed_garbage_is_malformed() {
    let h = signed("webhook", NOW, &sig(KEY, NOW, "<html>"));
    assert!(matches!(run(&h, "<html>"), Err(InboundError::Malformed(_))));
    let no_type = r#"{"data":{}}"#;
    let h = signed("webhook", NOW, &sig(KEY, NOW, no_type));
    assert!(matches!(run(&h, no_type), Err(InboundError::Malformed(_))));
    // A sound envelope with an unreadable sender is kept, without a message.
    let no_from = RECEIVED.replace("Ada Lovelace <Ada@Example.com>", "nobody");
    assert_eq!(ok(&no_from).message, None);
}

#[test]
fn message_id_from_headers_and_html_body() {
    let body = concat!(
        r#"{"type":"email.received","data":{"from":"bob@x.io","subject":"Re: hi","#,
        r#""headers":{"Message-ID":"<m2@x.io>"},"html":"<p>Thanks &amp; bye</p>"}}"#
    );
    let e = ok(body);
    assert_eq!(e.dedup_key, "<m2@x.io>");
    let m = e.message.expect("message");
    assert_eq!((m.text.as_str(), m.customer_name), ("Thanks & bye", None));
    assert_eq!(m.reply_to["subject"], "Re: hi");
    let listed = r#"{"type":"email.received","data":{"from":"bob@x.io","headers":[{"name":"message-id","value":"<m3@x.io>"}]}}"#;
    assert_eq!(ok(listed).dedup_key, "<m3@x.io>");
}

#[test]
fn webhook_id_is_the_fallback_key() {
    let body =
        r#"{"type":"email.received","data":{"email_id":"e1","from":"bob@x.io","subject":"s"}}"#;
    let e = ok(body);
    assert_eq!(e.dedup_key, WEBHOOK_ID);
    let m = e.message.expect("message");
    assert_eq!((m.text.as_str(), m.channel_message_id.as_str()), ("", "e1"));
    assert_eq!(m.reply_to["in_reply_to"], Value::Null);
}

#[test]
fn other_event_types_need_no_processing() {
    let body = r#"{"type":"email.delivered","data":{"email_id":"e1","message_id":"<m@x>"}}"#;
    let e = ok(body);
    assert_eq!((e.dedup_key.as_str(), e.message), (WEBHOOK_ID, None));
}
