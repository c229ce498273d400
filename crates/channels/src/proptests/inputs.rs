//! What the properties feed the parsers: hostile text, arbitrary bytes, and large inputs
//! built cheaply by repetition (repetition is also what turns a quadratic scan into seconds).

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

/// The largest generated input, in bytes.
pub(crate) const MAX_LEN: usize = 200 * 1024;

/// Text that has broken parsers before: control and bidi characters, combining marks,
/// non-characters, characters whose lowercase is longer, separators `lines()` and
/// `split_whitespace()` treat differently, and the syntax of every format involved.
#[rustfmt::skip]
const PIECES: &[&str] = &[
    "a", "Z", "0", " ", "\t", "\n", "\r\n", "\r", "\0", "\u{1b}", "\u{7f}", "\u{85}", "\u{a0}",
    "\u{202e}", "\u{200f}", "\u{202b}", "\u{2066}", "\u{200d}", "e\u{301}", "\u{301}\u{301}",
    "\u{feff}", "\u{fffd}", "\u{ffff}", "\u{10ffff}", "\u{2028}", "\u{3000}", "😀",
    "👩\u{200d}👩\u{200d}👧", "ß", "İ", "Ⅻ", "<", ">", "</", "<!--", "/", "@", "&", ";", "&amp;",
    "&lt;", "&nbsp;", "%", "%G1", "%e2%82", "+", "=", "\"", "\\", ":", ",", "{", "[", "re:",
    "RE: ", "whatsapp:+1", "v0=", "v1,",
];

/// Repeats `unit` up to `len` bytes, cut on a character boundary.
pub(crate) fn fill(unit: &str, len: usize) -> String {
    let mut out = unit.repeat(len / unit.len().max(1) + 1);
    let mut end = len.min(out.len());
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

/// Short hostile text: proptest's own arbitrary strings, or a run of [`PIECES`].
pub(crate) fn short_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        vec(select(PIECES), 0..48).prop_map(|p| p.concat()),
    ]
}

/// A long run (up to [`MAX_LEN`]) of a few repeated [`PIECES`].
pub(crate) fn long_text() -> impl Strategy<Value = String> {
    (vec(select(PIECES), 1..6), 1..=MAX_LEN).prop_map(|(unit, len)| fill(&unit.concat(), len))
}

/// Hostile text, mostly short, sometimes long.
pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![6 => short_text(), 1 => long_text()]
}

/// JSON nested far past serde_json's recursion limit (128), in each of the ways a body can
/// open a level, optionally behind a valid prefix.
fn deep_json() -> impl Strategy<Value = Vec<u8>> {
    let opener = select(&["[", "{\"a\":", "[{\"b\":[", "{\"type\":"][..]);
    (
        select(&["", "{\"type\":\"event_callback\",\"x\":"][..]),
        opener,
        100..20_000usize,
    )
        .prop_map(|(prefix, open, depth)| format!("{prefix}{}", open.repeat(depth)).into_bytes())
}

/// Arbitrary bytes: random, hostile text, long repetitions of a random unit, deep nesting.
pub(crate) fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => vec(any::<u8>(), 0..512),
        3 => text().prop_map(String::into_bytes),
        1 => (vec(any::<u8>(), 1..32), 1..=MAX_LEN)
            .prop_map(|(unit, len)| unit.iter().copied().cycle().take(len).collect()),
        1 => deep_json(),
    ]
}
