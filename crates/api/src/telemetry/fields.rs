//! What a field's name says about its value. Tracing fields reach Sentry by name (the
//! `Rust Tracing Fields` context, breadcrumb data, `tags.*`), and a name is the one thing we
//! know about a value before reading it: `to`, `body` or `api_key` carry customer data or a
//! secret whatever they hold today.

/// A name's last word that says the value is about the data, not the data itself:
/// `reply_id`, `body_len`, `token_type`, `provider_status` are kept (still pattern-scrubbed).
const METADATA: &[&str] = &[
    "id", "ids", "uuid", "len", "length", "size", "count", "bytes", "chars", "kind", "type",
    "status", "ms", "secs", "at", "version", "ttl",
];

/// Substrings of a normalised name (`snake_case`) that mark a secret.
const SECRET_PARTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "authorization",
    "api_key",
    "apikey",
    "cookie",
    "signature",
    "credential",
    "private_key",
];

/// Whole words that mark a secret.
const SECRET_WORDS: &[&str] = &["auth", "jwt", "bearer", "dsn", "otp", "pin"];

/// Words that mark customer text or contact details, wherever they sit in the name
/// (`body`, `message_body`, `customer_email`, `reply_text`).
const CUSTOMER_WORDS: &[&str] = &[
    "body",
    "text",
    "html",
    "content",
    "reply",
    "draft",
    "email",
    "emails",
    "phone",
    "msisdn",
    "recipient",
    "recipients",
    "sender",
    "subject",
    "customer",
    "transcript",
    "prompt",
    "completion",
    "snippet",
    "payload",
    "comment",
    "note",
];

/// Names that are contact details only on their own (`to`, Twilio's `From`): as a word they
/// are too common (`to_pod`, `from_version`).
const CONTACT_NAMES: &[&str] = &["to", "from", "cc", "bcc"];

/// Last words of an error's text.
const ERROR_WORDS: &[&str] = &[
    "error", "errors", "err", "reason", "detail", "details", "cause",
];

/// First words of a name that say the error text came from the other side of a call.
const PROVIDER_WORDS: &[&str] = &[
    "provider", "last", "delivery", "upstream", "remote", "response",
];

/// The treatment of a field, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    /// Pattern-scrub the value and keep it.
    Keep,
    /// Replace the value with `[scrubbed]`.
    Remove,
    /// An error's text: removed when it is a provider's (see `telemetry` docs), else kept.
    ErrorText,
}

/// The rule for field `name`. Span fields arrive as `span:field`; only `field` counts.
pub(super) fn classify(name: &str) -> Rule {
    let name = name.rsplit(':').next().unwrap_or(name);
    let words = words(name);
    let (Some(first), Some(last)) = (words.first(), words.last()) else {
        return Rule::Keep;
    };
    if METADATA.contains(&last.as_str()) {
        return Rule::Keep;
    }
    let joined = words.join("_");
    let is_word = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    if SECRET_PARTS.iter().any(|part| joined.contains(part))
        || is_word(SECRET_WORDS)
        || is_word(CUSTOMER_WORDS)
        || (words.len() == 1 && CONTACT_NAMES.contains(&first.as_str()))
    {
        return Rule::Remove;
    }
    if ERROR_WORDS.contains(&last.as_str()) {
        if words.len() > 1 && PROVIDER_WORDS.contains(&first.as_str()) {
            return Rule::Remove;
        }
        return Rule::ErrorText;
    }
    Rule::Keep
}

/// Whether a field set describes a call to a provider: it names the channel or the provider
/// (`channel`, `provider_status`), as dispatch does when it logs a failed delivery.
pub(super) fn names_a_provider<'a>(mut names: impl Iterator<Item = &'a String>) -> bool {
    names.any(|name| {
        let name = name.rsplit(':').next().unwrap_or(name);
        let words = words(name);
        words
            .first()
            .is_some_and(|w| w == "channel" || w == "provider")
    })
}

/// Lower-case words of `name`, split at non-alphanumerics and camelCase humps.
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::{Rule, classify};

    #[test]
    fn names_map_to_rules() {
        for (name, rule) in [
            ("body", Rule::Remove),
            ("Body", Rule::Remove),
            ("message_body", Rule::Remove),
            ("customer_email", Rule::Remove),
            ("customerEmail", Rule::Remove),
            ("reply_text", Rule::Remove),
            ("draft", Rule::Remove),
            ("to", Rule::Remove),
            ("From", Rule::Remove),
            ("reply_to", Rule::Remove),
            ("phone_number", Rule::Remove),
            ("access_token", Rule::Remove),
            ("X-Api-Key", Rule::Remove),
            ("webhook_secret", Rule::Remove),
            ("Authorization", Rule::Remove),
            ("password", Rule::Remove),
            ("provider_error", Rule::Remove),
            ("last_error", Rule::Remove),
            ("delivery_error", Rule::Remove),
            ("send:body", Rule::Remove),
            ("error", Rule::ErrorText),
            ("reason", Rule::ErrorText),
            ("db_error", Rule::ErrorText),
            ("outbox_id", Rule::Keep),
            ("reply_id", Rule::Keep),
            ("body_len", Rule::Keep),
            ("token_type", Rule::Keep),
            ("provider_status", Rule::Keep),
            ("attempt", Rule::Keep),
            ("channel", Rule::Keep),
            ("to_pod", Rule::Keep),
            ("from_version", Rule::Keep),
            ("total", Rule::Keep),
            ("photo_count", Rule::Keep),
            ("send_reply:attempt", Rule::Keep),
            ("", Rule::Keep),
        ] {
            assert_eq!(classify(name), rule, "{name}");
        }
    }
}
