//! Email's webhooks through [`crate::verify_and_parse`], signed per Standard Webhooks so
//! every input reaches the parser, and HTML-to-text, which both the email webhook and the
//! inbound email job run on a body the sender wrote: linear time, output no longer than the
//! input, and the whitespace it promises (single spaces, trimmed lines, at most one blank
//! line in a row).

use http::HeaderMap;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};
use switchboard_domain::ChannelKind;

use super::html_to_text;
use crate::proptests::edits::{edits, mutate};
use crate::proptests::inputs::{MAX_LEN, bytes, fill, text};
use crate::proptests::webhooks::signed;
use crate::proptests::{SCALE, SMALL_LEN, config, ratio_config, scales_linearly, timed};
use crate::test_support::{NOW, b64, headers, hmac_sha256};

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
const WEBHOOK_ID: &str = "msg_2abc";

/// Valid webhooks of each shape the email parser tells apart.
pub(crate) const BASES: &[&str] = &[
    concat!(
        r#"{"type":"email.received","created_at":"2026-02-22T23:41:12.126Z","data":{"email_id":"5676-ff6f","#,
        r#""from":"Ada Lovelace <Ada@Example.com>","to":["support@acme.test"],"message_id":"<CAF123@mail.example.com>","#,
        r#""subject":"Where is my order?","text":"It has been a week."}}"#
    ),
    concat!(
        r#"{"type":"email.received","data":{"from":"bob@x.io","subject":"Re: hi","headers":{"Message-ID":"<m2@x.io>"},"#,
        r#""html":"<p>Thanks &amp; bye</p><style>p{}</style>"}}"#
    ),
    concat!(
        r#"{"type":"email.received","data":{"email_id":"e1","from":{"email":"c@x.io","name":"C"},"#,
        r#""headers":[{"name":"message-id","value":"<m3@x.io>"}],"text":" ","html":"<div>hi<br>there</div>"}}"#
    ),
    r#"{"type":"email.delivered","data":{"email_id":"e1","message_id":"<m@x>"}}"#,
];

/// The connection's secrets.
pub(crate) fn secrets() -> Value {
    json!({
        "webhook_secret": format!("whsec_{}", b64(KEY)),
        "api_key": "re_1",
        "from_address": "s@acme.test",
    })
}

/// The headers Resend would send with `body`.
pub(crate) fn signed_headers(body: &[u8]) -> HeaderMap {
    let ts = NOW.to_string();
    let content = [format!("{WEBHOOK_ID}.{ts}.").as_bytes(), body].concat();
    let sig = b64(&hmac_sha256(KEY, &content));
    headers(&[
        ("webhook-id", WEBHOOK_ID),
        ("webhook-timestamp", &ts),
        ("webhook-signature", &format!("v1,{sig}")),
    ])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn email_signed_bytes_never_panic(body in bytes()) {
        signed(ChannelKind::Email, &body)?;
    }

    #[test]
    fn email_webhook_mutations_never_panic(base in select(BASES), (edits, cut) in edits()) {
        signed(ChannelKind::Email, &mutate(base, &edits, cut))?;
    }
}

/// Tag soup: every construct the converter treats specially, whole and broken.
#[rustfmt::skip]
const HTML: &[&str] = &[
    "<", ">", "</", "<!--", "-->", "<!-", "--", "<>", "</>", "<<", ">>", "< p>", "</ p>",
    "<style>", "<STYLE a=1>", "</style>", "</style", "</styl", "</ style>", "<script>",
    "<script src=x/>", "</script >", "</SCRIPT>", "<p>", "</p>", "<br/>", "<br>", "<BR >",
    "<div class=\"x\">", "</div>", "<li>", "<h1>", "</h3>", "<tr>", "<b>", "&amp;", "&amp;lt;",
    "&nbsp;", "&lt;", "&gt;", "&quot;", "&#39;", "&apos;", "&", ";", "#", "text", "é",
    "e\u{301}", "\u{202e}", "\0", "\u{3000}", "\u{a0}", "\u{85}", "\u{2028}", " ", "  ", "\t",
    "\n", "\r", "\r\n", "\n\n\n", "😀", "\u{feff}",
];

/// Short soup, or a unit of soup repeated up to [`MAX_LEN`].
fn html() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => vec(select(HTML), 0..200).prop_map(|p| p.concat()),
        2 => text(),
        2 => (vec(select(HTML), 1..12), 1..=MAX_LEN).prop_map(|(unit, len)| fill(&unit.concat(), len)),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn html_to_text_is_bounded_and_normalised(html in html()) {
        let text = timed("html_to_text", || html_to_text(&html))?;
        // UTF-8 by its type (and `unsafe` is forbidden); asserted so a byte-level rewrite keeps it.
        prop_assert!(std::str::from_utf8(text.as_bytes()).is_ok());
        // Tags shrink to at most a line break and entities to one character, so nothing
        // grows: the output fits in the input.
        prop_assert!(text.len() <= html.len(), "{} bytes from {}", text.len(), html.len());
        prop_assert_eq!(text.trim(), text.as_str());
        prop_assert!(!text.contains("\n\n\n"), "more than one blank line in a row");
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            prop_assert_eq!(words.join(" "), line, "whitespace not collapsed");
        }
    }
}

proptest! {
    #![proptest_config(ratio_config())]

    #[test]
    fn html_to_text_scales_linearly(unit in vec(select(HTML), 1..12)) {
        let unit = unit.concat();
        let (small, large) = (fill(&unit, SMALL_LEN), fill(&unit, SMALL_LEN * SCALE));
        scales_linearly("html_to_text", small.as_str(), large.as_str(), html_to_text)?;
    }
}

/// The ratio check fails the quadratic that `html_to_text` once had (it lowercased the rest
/// of the document at each `<style>`), which the absolute bound lets through at 200 KB.
#[test]
fn proptest_ratio_check_catches_a_fast_quadratic() {
    let quadratic = |html: &str| {
        html.match_indices("<style>")
            .map(|(at, _)| html[at..].to_lowercase().len())
            .sum::<usize>()
    };
    let (small, large) = (
        fill("<style></style>", SMALL_LEN),
        fill("<style></style>", SMALL_LEN * SCALE),
    );
    assert!(scales_linearly("quadratic", small.as_str(), large.as_str(), quadratic).is_err());
    assert!(scales_linearly("html_to_text", small.as_str(), large.as_str(), html_to_text).is_ok());
}
