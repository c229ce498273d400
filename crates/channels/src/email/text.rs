//! Small text helpers for inbound email: good enough to hand a message to the agent, not a
//! MIME or HTML parser.
//!
//! [`html_to_text`] is a scanner of our own rather than `html2text`: the text is handed to
//! the agent, not rendered, so no DOM is needed; one pass keeps it linear (1 MiB of
//! `<style>` tags in a few milliseconds); and html5ever's tree would cost more than the
//! whole accept path for a large email.

/// Splits `Name <addr@x>` or a bare address into (display name, lowercased address).
/// Addresses compare case-insensitively in practice, and the lowercased form is the
/// customer's identity, so `Ada@X.com` and `ada@x.com` are one customer.
pub(crate) fn parse_address(raw: &str) -> Option<(Option<String>, String)> {
    let raw = raw.trim();
    let (name, addr) = match (raw.rfind('<'), raw.ends_with('>')) {
        (Some(open), true) => {
            let name = raw[..open].trim().trim_matches('"').trim();
            (
                Some(name).filter(|n| !n.is_empty()),
                &raw[open + 1..raw.len() - 1],
            )
        }
        _ => (None, raw),
    };
    let addr = addr.trim();
    if !addr.contains('@') || addr.contains(char::is_whitespace) {
        return None;
    }
    Some((name.map(str::to_owned), addr.to_lowercase()))
}

/// The subject a reply should carry, without stacking `Re: Re:`.
pub(crate) fn reply_subject(subject: &str) -> String {
    let subject = subject.trim();
    let already = subject
        .get(..3)
        .is_some_and(|p| p.eq_ignore_ascii_case("re:"));
    if already {
        subject.to_owned()
    } else {
        format!("Re: {subject}")
    }
}

/// Tags after which a line break reads naturally.
const BREAKS: &[&str] = &[
    "br", "p", "/p", "div", "/div", "li", "tr", "/tr", "h1", "h2", "h3", "/h1", "/h2", "/h3",
];

/// A crude HTML-to-text pass for bodies that come without a text part: drops tags, comments
/// and `<script>`/`<style>` contents, breaks lines at block tags, decodes common entities.
///
/// One pass over the input: every search starts where the previous one stopped and nothing
/// is copied or case-folded ahead of the scan, so the time is linear in the input (an
/// earlier version lowercased the rest of the document at each `<style>`, which made a
/// crafted email of many of them take minutes).
pub fn html_to_text(html: &str) -> String {
    let bytes = html.as_bytes();
    let mut out = String::with_capacity(html.len().min(1 << 20));
    // `<` and `>` are ASCII, so every index the scan stops at is a character boundary.
    let mut at = 0;
    while let Some(open) = find_byte(bytes, at, b'<') {
        out.push_str(&html[at..open]);
        if bytes[open..].starts_with(b"<!--") {
            at = find_seq(bytes, open + 4, b"-->").map_or(bytes.len(), |e| e + 3);
            continue;
        }
        let Some(close) = find_byte(bytes, open, b'>') else {
            at = bytes.len();
            break;
        };
        let name = tag_name(&html[open + 1..close]);
        at = close + 1;
        if name.eq_ignore_ascii_case("script") || name.eq_ignore_ascii_case("style") {
            at = after_closing_tag(bytes, at, name.as_bytes());
        } else if name.len() <= 3 && BREAKS.iter().any(|b| b.eq_ignore_ascii_case(name)) {
            out.push('\n');
        }
    }
    out.push_str(&html[at..]);
    let decoded = decode_entities(&out);
    let mut text = String::with_capacity(decoded.len());
    for line in decoded.lines() {
        let mut words = line.split_whitespace().peekable();
        if words.peek().is_none() && (text.is_empty() || text.ends_with("\n\n")) {
            continue;
        }
        for (i, word) in words.enumerate() {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(word);
        }
        text.push('\n');
    }
    text.trim().to_owned()
}

/// The first `byte` at or after `from`.
fn find_byte(bytes: &[u8], from: usize, byte: u8) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        if bytes[i] == byte {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The first `seq` at or after `from` (a short sequence whose first byte is not repeated in
/// it, so a mismatch never needs to step back).
fn find_seq(bytes: &[u8], from: usize, seq: &[u8]) -> Option<usize> {
    let mut at = from;
    while let Some(i) = find_byte(bytes, at, seq[0]) {
        if bytes[i..].starts_with(seq) {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

/// The name of the tag inside `<…>` (an end tag keeps its `/`): `p` of `p class="x"`,
/// `/div` of `/div`, `br` of `br/`.
fn tag_name(inside: &str) -> &str {
    let inside = inside.trim_start();
    let skip = usize::from(inside.starts_with('/'));
    let end = inside[skip..]
        .find(|c: char| c.is_whitespace() || c == '/')
        .map_or(inside.len(), |e| skip + e);
    &inside[..end]
}

/// Where the text after the `</{name}…>` closing a raw-text element starts, searching from
/// `from` without regard to case; the end of the input when it is never closed.
fn after_closing_tag(bytes: &[u8], from: usize, name: &[u8]) -> usize {
    let mut at = from;
    while let Some(open) = find_seq(bytes, at, b"</") {
        let after = open + 2;
        let candidate = bytes.get(after..after + name.len());
        if candidate.is_some_and(|c| c.eq_ignore_ascii_case(name)) {
            return find_byte(bytes, after + name.len(), b'>').map_or(bytes.len(), |e| e + 1);
        }
        at = after;
    }
    bytes.len()
}

fn decode_entities(s: &str) -> String {
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let named = parse_address("\"Ada L\" <Ada@Example.COM>");
        assert_eq!(
            named,
            Some((Some("Ada L".into()), "ada@example.com".into()))
        );
        assert_eq!(parse_address(" bob@x.io "), Some((None, "bob@x.io".into())));
        assert_eq!(parse_address("<c@x.io>"), Some((None, "c@x.io".into())));
        assert_eq!(parse_address("Nobody"), None);
    }

    #[test]
    fn subjects() {
        assert_eq!(reply_subject("Order 12"), "Re: Order 12");
        assert_eq!(reply_subject("RE: Order 12"), "RE: Order 12");
    }

    #[test]
    fn html() {
        let html = "<html><style>p{color:red}</style><p>Hi&nbsp;there,</p><p>A &amp; B<br/>line  two</p><script>x()</script></html>";
        // Paragraphs keep one blank line between them, never more.
        assert_eq!(html_to_text(html), "Hi there,\n\nA & B\nline two");
        assert_eq!(html_to_text("plain <b>bold</b> &lt;3"), "plain bold <3");
        assert_eq!(
            html_to_text("<STYLE>x</Style>a<!-- c <p> -->b<SCRIPT>y()</script >c<br>d"),
            "abc\nd"
        );
        assert_eq!(html_to_text("unclosed <style>p{}"), "unclosed");
    }

    /// The input that was quadratic before: each `<style>` lowercased the rest. Compared
    /// with a sixteenth of it rather than with a clock, so a test run sharing two cores
    /// with many others cannot fail it: linear work takes about 16 times as long for 16
    /// times the input, the quadratic version took about 256 times. Best of three each.
    #[test]
    fn a_megabyte_of_style_tags_converts_in_linear_time() {
        // Linear is 16x, quadratic 256x: the bound sits between them with room on both
        // sides, and each size's best of five alternating runs leaves out the runs a busy
        // machine slowed down.
        let (small, large) = (
            "<style></style>".repeat((1 << 16) / 15),
            "<style></style>".repeat((1 << 20) / 15),
        );
        let time = |html: &str| {
            let started = std::time::Instant::now();
            assert_eq!(html_to_text(html), "");
            started.elapsed()
        };
        let (mut small_best, mut large_best) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..5 {
            small_best = small_best.min(time(&small));
            large_best = large_best.min(time(&large));
        }
        let (small, large) = (small_best, large_best);
        let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
        assert!(
            ratio < 128.0,
            "16x the input took {ratio:.0}x as long ({small:?} → {large:?})"
        );
    }
}
