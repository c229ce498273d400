//! Property tests: no Socket.IO auth payload makes the handshake's token extraction panic or
//! take more than linear time (issue 24, item 8), and what reaches the token verifier is
//! only ever a non-blank string the client sent as `auth.token`, trimmed.
//!
//! The extraction is the first lines of [`Gate::admit`], which needs a live socket and
//! Postgres; [`token_of`] restates those lines over the real [`Auth`] type, decoded as
//! socketioxide's common parser decodes a CONNECT packet's auth: `serde_json::from_str` of
//! the text after the packet type, `{}` when there is none.
//!
//! Time is checked as in the channels' property tests: every call within an absolute bound,
//! and an 8x larger payload taking no more than about 8x as long (which catches a quadratic
//! pass even when its inner loop is fast enough to stay under the bound). In `cargo test`
//! each property runs 64 cases (16 for the ratio) from a fixed seed;
//! `scripts/fuzz-parsers.sh` runs them long.

use super::{Auth, Refusal};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, RngSeed, TestCaseError};
use std::time::{Duration, Instant};

/// Cases per property when `PROPTEST_CASES` is not set, and the seed when
/// `PROPTEST_RNG_SEED` is not: the suite sees the same inputs each run.
const SUITE_CASES: u32 = 64;
const SUITE_SEED: u64 = 0x5b_24_08;
/// The most one extraction may take; the largest payloads (~200 KB) take a few
/// milliseconds unoptimised.
const TIME_BOUND: Duration = if cfg!(debug_assertions) {
    Duration::from_millis(500)
} else {
    Duration::from_millis(100)
};
const MAX_LEN: usize = 200 * 1024;
/// The ratio check: the small payload's size, how many times larger the large one is, how
/// many times the linear expectation it may take, and the noise forgiven on top.
const SMALL_LEN: usize = 25 * 1024;
const SCALE: usize = 8;
const TOLERANCE: u32 = 3;
const RATIO_SLACK: Duration = Duration::from_millis(10);

fn config() -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse().ok());
    Config {
        cases: env("PROPTEST_CASES")
            .and_then(|n: u64| u32::try_from(n).ok())
            .unwrap_or(SUITE_CASES),
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(SUITE_SEED)),
        failure_persistence: None,
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// `auth` (the CONNECT packet's payload text, if any) to the token `admit` hands the
/// verifier, or the refusal it answers.
fn token_of(auth: Option<&str>) -> Result<String, Refusal> {
    let decoded: Result<Auth, serde_json::Error> = serde_json::from_str(auth.unwrap_or("{}"));
    let token = decoded
        .ok()
        .and_then(|a| a.token)
        .filter(|t| !t.trim().is_empty())
        .ok_or(Refusal::MissingToken)?;
    Ok(token.trim().to_owned())
}

/// [`token_of`] within [`TIME_BOUND`], the best of three when one run is slow (a shared
/// two-core box can stretch one measurement, rarely three).
fn timed(auth: &str) -> Result<Result<String, Refusal>, TestCaseError> {
    let started = Instant::now();
    let out = token_of(Some(auth));
    let mut best = started.elapsed();
    for _ in 0..2 {
        if best <= TIME_BOUND {
            break;
        }
        let started = Instant::now();
        drop(token_of(Some(auth)));
        best = best.min(started.elapsed());
    }
    if best > TIME_BOUND {
        return Err(TestCaseError::fail(format!(
            "{} bytes of auth took {best:?}",
            auth.len()
        )));
    }
    Ok(out)
}

/// Fails if [`token_of`] takes more than [`TOLERANCE`] times the linear expectation on
/// `large` ([`SCALE`] times `small`). The sizes run in turn, so a burst of load hits both
/// alike; the best run of each counts, over up to five rounds of three.
fn scales_linearly(small: &str, large: &str) -> Result<(), TestCaseError> {
    let run = |auth: &str| {
        let started = Instant::now();
        drop(std::hint::black_box(token_of(Some(std::hint::black_box(
            auth,
        )))));
        started.elapsed()
    };
    let limit = |small: Duration| small * (TOLERANCE * SCALE as u32) + RATIO_SLACK;
    let (mut s, mut l) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        for _ in 0..3 {
            s = s.min(run(small));
            l = l.min(run(large));
        }
        if l <= limit(s) {
            return Ok(());
        }
    }
    Err(TestCaseError::fail(format!(
        "{l:?} on {} bytes, {s:?} on {} (limit {:?})",
        large.len(),
        small.len(),
        limit(s)
    )))
}

/// Text that has broken parsers before: control, bidi and combining characters, Unicode
/// whitespace that `trim` removes, and JSON's own syntax.
#[rustfmt::skip]
const PIECES: &[&str] = &[
    "a", "eyJ", ".", "-", "_", " ", "\t", "\n", "\r", "\0", "\u{a0}", "\u{3000}", "\u{2028}",
    "\u{feff}", "\u{202e}", "\u{200f}", "e\u{301}", "\u{10ffff}", "😀", "\"", "\\", "{", "}",
    "[", "]", ":", ",", "token", "Bearer ",
];

/// JSON text no serialiser produces: numbers past `f64`, lone surrogates, bad escapes.
#[rustfmt::skip]
const RAW: &[&str] = &[
    "null", "true", "0", "-0", "1e999", "18446744073709551616", "-9223372036854775809",
    "\"\\ud800\"", "\"\\udc00\"", "\"\\ud83d\\ude00\"", "\"\\u0000\"", "\"\\uZZZZ\"",
    "\"\\u3000\\u00a0\"", "\"tab\there\"", "\"\\", "[]", "{}", "[\"t\"]", "{\"token\":\"t\"}",
    "NaN", "",
];

fn short_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        vec(select(PIECES), 0..32).prop_map(|p| p.concat()),
    ]
}

/// Mostly short, sometimes up to [`MAX_LEN`] of a repeated unit.
fn text() -> impl Strategy<Value = String> {
    let long =
        (vec(select(PIECES), 1..4), 1..=MAX_LEN).prop_map(|(unit, len)| fill(&unit.concat(), len));
    prop_oneof![6 => short_text(), 1 => long]
}

/// `unit` repeated up to `len` bytes, cut on a character boundary.
fn fill(unit: &str, len: usize) -> String {
    let mut out = unit.repeat(len / unit.len().max(1) + 1);
    let mut end = len.min(out.len());
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// A JSON value as text: a string, raw text from [`RAW`], or nesting up to past serde_json's
/// recursion limit (128).
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => text().prop_map(|s| quoted(&s)),
        3 => select(RAW).prop_map(str::to_owned),
        1 => (select(&["[", "{\"a\":"][..]), 1..20_000usize)
            .prop_map(|(open, depth)| open.repeat(depth)),
    ]
}

/// An auth payload: an object whose members are `token` (none, one or several times) and
/// others, or something that is not an object at all; maybe cut short.
fn auth() -> impl Strategy<Value = String> {
    let member = prop_oneof![
        3 => value().prop_map(|v| format!("\"token\":{v}")),
        1 => (short_text(), value()).prop_map(|(k, v)| format!("{}:{v}", quoted(&k))),
    ];
    let object = vec(member, 0..4).prop_map(|members| format!("{{{}}}", members.join(",")));
    let payload = prop_oneof![4 => object, 1 => value(), 1 => text()];
    (payload, proptest::option::weighted(0.1, any::<usize>())).prop_map(|(mut auth, cut)| {
        if let Some(cut) = cut {
            let mut end = cut % (auth.len() + 1);
            while !auth.is_char_boundary(end) {
                end -= 1;
            }
            auth.truncate(end);
        }
        auth
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn auth_payloads_never_panic(auth in auth()) {
        if let Ok(token) = timed(&auth)? {
            prop_assert!(!token.is_empty() && token.trim() == token, "{:?}", token);
            prop_assert!(auth.len() >= token.len(), "a token longer than its payload");
        }
    }

    /// Well-formed payloads: a string token is taken trimmed, a blank one or any other type
    /// is a missing token, and other members (nested within the limit) change nothing.
    #[test]
    fn a_string_token_is_taken_trimmed(
        token in prop_oneof![
            3 => text().prop_map(Ok::<String, &'static str>),
            1 => select(&["null", "0", "1e3", "true", "[\"t\"]", "{\"token\":\"t\"}"][..]).prop_map(Err),
        ],
        extra in proptest::option::of((short_text(), 0..100usize)),
        token_first in any::<bool>(),
    ) {
        let value = token.as_ref().map_or_else(|raw| (*raw).to_owned(), |t| quoted(t));
        let mut members = vec![format!("\"token\":{value}")];
        if let Some((key, depth)) = &extra {
            if key != "token" {
                members.push(format!("{}:{}1{}", quoted(key), "[".repeat(*depth), "]".repeat(*depth)));
            }
        }
        if !token_first {
            members.reverse();
        }
        let got = timed(&format!("{{{}}}", members.join(",")))?;
        match token {
            Ok(t) if !t.trim().is_empty() => prop_assert_eq!(got.ok(), Some(t.trim().to_owned())),
            _ => prop_assert!(matches!(got, Err(Refusal::MissingToken)), "{:?}", got),
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: (config().cases / 4).max(1), ..config() })]

    /// A long token, or a long other member, made of a repeated unit, at two sizes.
    #[test]
    fn auth_payloads_scale_linearly(
        unit in short_text().prop_filter("a unit to repeat", |u| !u.is_empty()),
        in_token in any::<bool>(),
    ) {
        let auth = |len: usize| {
            let long = quoted(&fill(&unit, len));
            if in_token {
                format!("{{\"token\":{long}}}")
            } else {
                format!("{{{long}:[1,{{}}],\"token\":\"t\"}}")
            }
        };
        scales_linearly(&auth(SMALL_LEN), &auth(SMALL_LEN * SCALE))?;
    }
}

#[test]
fn no_auth_is_a_missing_token() {
    assert!(matches!(token_of(None), Err(Refusal::MissingToken)));
    assert_eq!(
        token_of(Some(r#"{"token":" eyJ.a.b\n","x":1}"#))
            .ok()
            .as_deref(),
        Some("eyJ.a.b")
    );
}
