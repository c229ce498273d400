//! Small text helpers for inbound email: good enough to hand a message to the agent, not a
//! MIME or HTML parser.

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

/// A crude HTML-to-text pass for bodies that come without a text part: drops tags and
/// `<script>`/`<style>` contents, breaks lines at block tags, decodes common entities.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('>') else {
            rest = "";
            break;
        };
        let tag = rest[open + 1..open + close].trim().to_ascii_lowercase();
        let name = tag
            .split(|c: char| c.is_whitespace() || c == '>')
            .next()
            .unwrap_or_default();
        let name = name.trim_end_matches('/');
        rest = &rest[open + close + 1..];
        if name == "script" || name == "style" {
            let end = format!("</{name}");
            let skip = rest.to_ascii_lowercase().find(&end).unwrap_or(rest.len());
            rest = &rest[skip..];
        } else if BREAKS.contains(&name) {
            out.push('\n');
        }
    }
    out.push_str(rest);
    let decoded = decode_entities(&out);
    let mut text = String::new();
    for line in decoded.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() && (text.is_empty() || text.ends_with("\n\n")) {
            continue;
        }
        text.push_str(&line);
        text.push('\n');
    }
    text.trim().to_owned()
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
    }
}
