//! Redaction of free text (messages, exception values, kept field values): what a field's
//! name cannot tell us, the shape of the text can. One regex finds every candidate in one
//! pass; the shapes that need more than a regex (phone numbers, long secrets) are checked
//! in code, so that UUIDs, dates, IP addresses and ordinary numbers survive.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What replaces a value removed whole (by its field's name, or verbatim elsewhere).
pub(super) const SCRUBBED: &str = "[scrubbed]";

/// A value removed by name is also erased where it is repeated verbatim (a message built
/// with `{}`), if it is at least this long: shorter ones would erase ordinary words.
const MIN_VERBATIM: usize = 6;

/// Every alternative starts after a non-word character (the regex crate has no look-behind),
/// so `before_send` or `bot123` never count as a prefix. Order matters where two could start
/// at the same place: the specific token shapes, then emails, then long runs (so a hex secret
/// that starts with digits is not taken for a phone number and skipped), then phone numbers.
const PATTERN: &str = concat!(
    r"(?P<pre>^|[^A-Za-z0-9_])(?:",
    // Credentials in a URL: scheme://user:password@host.
    r"(?P<userinfo>(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^\s/:@]+:[^\s/@]+@)",
    // An Authorization header value, wherever it was printed.
    r"|(?P<auth>(?i:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}",
    // A JWT: base64url JSON header (always `eyJ`), payload, signature.
    r"|(?P<jwt>eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)",
    // A Telegram bot token, also inside an API URL (`/bot123456:AA…/sendMessage`).
    r"|(?P<telegram>(?:bot)?[0-9]{6,12}:[A-Za-z0-9_-]{30,})",
    // Provider secrets with a recognisable prefix, however short the rest.
    r"|(?P<prefixed>(?:whsec_|xox[a-z]-|xapp-|sk_live_|sk_test_|rk_live_|rk_test_|ghp_|gho_|github_pat_|glpat-|SG\.)[A-Za-z0-9_=+/.-]{8,})",
    r"|(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})",
    // Long base64/base64url/hex runs; `looks_secret` decides.
    r"|(?P<long>[A-Za-z0-9+/_=-]{32,})",
    // Digits with the separators people write phone numbers with; `is_phone` decides.
    r"|(?P<phone>(?:\+|%2[Bb])?\(?[0-9][0-9 ().-]{5,30}[0-9])",
    r")",
);

/// `None` only if the pattern does not compile, which a unit test rules out; the scrub
/// then fails closed (see `scrub_text`).
static REGEX: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(PATTERN).ok());

/// `text` with the values in `removed` erased and emails, phone numbers and tokens replaced
/// by `[email]`, `[phone]` and `[token]`.
pub(super) fn scrub_text<'a>(text: &'a str, removed: &[String]) -> Cow<'a, str> {
    if text == SCRUBBED {
        return Cow::Borrowed(text);
    }
    let mut text = Cow::Borrowed(text);
    for value in removed {
        if value.len() >= MIN_VERBATIM && text.contains(value.as_str()) {
            text = Cow::Owned(text.replace(value.as_str(), SCRUBBED));
        }
    }
    let Some(regex) = REGEX.as_ref() else {
        return Cow::Borrowed(SCRUBBED);
    };
    match regex.replace_all(&text, |caps: &Captures| replacement(&text, caps)) {
        Cow::Borrowed(_) => text,
        Cow::Owned(scrubbed) => Cow::Owned(scrubbed),
    }
}

/// Replaces `text` in place if anything in it needs scrubbing.
pub(super) fn scrub_string(text: &mut String, removed: &[String]) {
    if let Cow::Owned(scrubbed) = scrub_text(text, removed) {
        *text = scrubbed;
    }
}

/// The replacement of one match of `REGEX` in `haystack`.
fn replacement(haystack: &str, caps: &Captures) -> String {
    let pre = caps.name("pre").map_or("", |m| m.as_str());
    let whole = caps.get(0).map_or("", |m| m.as_str());
    if caps.name("userinfo").is_some() {
        let scheme = caps.name("scheme").map_or("", |m| m.as_str());
        return format!("{pre}{scheme}{SCRUBBED}@");
    }
    if let Some(auth) = caps.name("auth") {
        return format!("{pre}{}[token]", auth.as_str());
    }
    if caps.name("jwt").is_some()
        || caps.name("telegram").is_some()
        || caps.name("prefixed").is_some()
    {
        return format!("{pre}[token]");
    }
    if caps.name("email").is_some() {
        return format!("{pre}[email]");
    }
    if let Some(long) = caps.name("long") {
        if looks_secret(long.as_str()) {
            return format!("{pre}[token]");
        }
    }
    if let Some(phone) = caps.name("phone") {
        let after = haystack[phone.end()..].chars().next();
        let glued = matches!(pre, "-" | "." | "/")
            || after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if !glued && is_phone(phone.as_str()) {
            return format!("{pre}[phone]");
        }
    }
    whole.to_owned()
}

/// A long run is a secret if it mixes digits with both cases (base64 of random bytes) or
/// holds 32+ hex digits in a row (HMACs, API keys). Paths, pod names and hyphenated UUIDs
/// (hex groups of at most 12) do neither.
fn looks_secret(run: &str) -> bool {
    let digit = run.bytes().any(|b| b.is_ascii_digit());
    let lower = run.bytes().any(|b| b.is_ascii_lowercase());
    let upper = run.bytes().any(|b| b.is_ascii_uppercase());
    let longest_hex = run
        .split(|c: char| !c.is_ascii_hexdigit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    (digit && lower && upper) || longest_hex >= 32
}

/// Whether digits with separators are a phone number: 7 to 15 digits (E.164's range) and,
/// without a leading `+`, grouped the way numbers are dialled (`(500) 555-0001`,
/// `500-555-0001`, `020 7946 0958`). Dates, IPv4 addresses, number lists and bare digit
/// runs (timestamps, sizes and ids look the same) are not.
fn is_phone(candidate: &str) -> bool {
    let (plus, rest) = match candidate.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => match candidate.get(..3) {
            Some("%2B" | "%2b") => (true, &candidate[3..]),
            _ => (false, candidate),
        },
    };
    let mut groups: Vec<usize> = Vec::new();
    let mut separators: Vec<&str> = Vec::new();
    let mut parens = false;
    let mut rest = rest;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            groups.push(digits);
            rest = &rest[digits..];
            continue;
        }
        let sep_len = rest.len() - rest.trim_start_matches(|c: char| !c.is_ascii_digit()).len();
        let separator = &rest[..sep_len];
        if sep_len > 2 || separator == "  " {
            return false;
        }
        parens |= separator.contains(['(', ')']);
        separators.push(separator);
        rest = &rest[sep_len..];
    }
    let total: usize = groups.iter().sum();
    if !(7..=15).contains(&total) {
        return false;
    }
    if plus {
        return groups.len() <= 6;
    }
    let (Some(&first), Some(&last)) = (groups.first(), groups.last()) else {
        return false;
    };
    let dialled = (3..=4).contains(&groups.len()) || (groups.len() == 2 && parens);
    let date = groups.len() == 3 && groups[0] <= 2 && groups[1] <= 2;
    let ipv4 = groups.len() == 4 && separators.iter().all(|s| *s == ".");
    dialled && !date && !ipv4 && first <= 5 && last >= 3 && groups.iter().skip(1).all(|&g| g >= 2)
}

#[cfg(test)]
mod tests {
    use super::{REGEX, scrub_text};

    fn scrubbed(text: &str) -> String {
        scrub_text(text, &[]).into_owned()
    }

    #[test]
    fn the_pattern_compiles() {
        assert!(REGEX.is_some());
    }

    #[test]
    fn phone_numbers_are_replaced() {
        for (text, expected) in [
            (
                "The 'To' number +15005550001 is not a valid phone number.",
                "The 'To' number [phone] is not a valid phone number.",
            ),
            ("whatsapp:+15005550001", "whatsapp:[phone]"),
            ("To=%2B15005550001&Body=hi", "To=[phone]&Body=hi"),
            ("call +1 (500) 555-0001 now", "call [phone] now"),
            ("+44 20 7946 0958", "[phone]"),
            ("(500) 555-0001", "[phone]"),
            ("500-555-0001", "[phone]"),
            ("500.555.0001.", "[phone]."),
            ("1-500-555-0001", "[phone]"),
            ("ring 020 7946 0958", "ring [phone]"),
        ] {
            assert_eq!(scrubbed(text), expected, "{text}");
        }
    }

    #[test]
    fn ordinary_numbers_survive() {
        for text in [
            "outbox 0190f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d0e failed",
            "12345678-1234-1234-1234-123456789012",
            "at 2024-05-01T12:00:00.123456Z",
            "at 2024-05-01 12:00:00 UTC",
            "on 01.05.2024 and 2024-05-01",
            "took 1500ms, then 2.5s, then 1.234567s",
            "provider answered 429 after 3 tries",
            "retrying in 5 10 20 40 80 seconds",
            "unix 1714567890123 and 1714567890",
            "peer 192.168.100.200:5432",
            "version 1.85.0",
            "status 503",
            "ids 4 8 15 16 23 42",
        ] {
            assert_eq!(scrubbed(text), text);
        }
    }

    #[test]
    fn emails_and_tokens_are_replaced() {
        for (text, expected) in [
            ("from ann@example.com:", "from [email]:"),
            ("<ann.lee+shop@mail.example.co.uk>", "<[email]>"),
            (
                "Authorization: Bearer abc.def-ghi_jkl",
                "Authorization: Bearer [token]",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1rwW1gFWFOEjXk",
                "jwt [token]",
            ),
            (
                "url https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
                "url https://api.telegram.org/[token]/sendMessage",
            ),
            (
                "secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "secret [token]",
            ),
            ("xoxb-1234-5678-abcdefghijkl", "[token]"),
            (
                "sig v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
                "sig [token]",
            ),
            ("key re_123abcDEF456ghiJKL789mnoPQR000stu", "key [token]"),
            (
                "postgres://app:s3cr3t@db:5432/switchboard",
                "postgres://[scrubbed]@db:5432/switchboard",
            ),
        ] {
            assert_eq!(scrubbed(text), expected, "{text}");
        }
    }

    #[test]
    fn harmless_long_words_survive() {
        for text in [
            "switchboard-api-7d4b9c8f6d-abcde restarted",
            "crates/flows/src/dispatch/record.rs",
            "before_send_callback_was_registered_here",
            "switchboard_flows::dispatch::record",
        ] {
            assert_eq!(scrubbed(text), text);
        }
    }

    #[test]
    fn removed_values_are_erased_verbatim() {
        let removed = vec!["Hello Ann, your order shipped".to_owned(), "hi".to_owned()];
        assert_eq!(
            scrub_text("agent said: Hello Ann, your order shipped (hi)", &removed),
            "agent said: [scrubbed] (hi)"
        );
    }
}
