//! HTML-to-text, which both the email webhook and the inbound email job run on a body the
//! sender wrote: linear time, output no longer than the input, and the whitespace it
//! promises (single spaces, trimmed lines, at most one blank line in a row). Also
//! [`crate::cap_text`], which every inbound text goes through.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use super::inputs::{MAX_LEN, fill, text};
use super::{SCALE, SMALL_LEN, config, ratio_config, scales_linearly, timed};
use crate::email::html_to_text;
use crate::inbound::{TRUNCATED, cap_text};

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

    #[test]
    fn cap_text_cuts_on_a_character_boundary(text in text(), max in 0..=MAX_LEN + 64) {
        let capped = timed("cap_text", || cap_text(text.clone(), max))?;
        if text.len() <= max {
            prop_assert_eq!(capped, text);
        } else {
            prop_assert!(capped.len() <= max.max(TRUNCATED.len()));
            let kept = capped.strip_suffix(TRUNCATED).expect("marked as cut");
            prop_assert!(text.starts_with(kept));
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
