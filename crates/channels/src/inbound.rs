//! The inbound half every channel shares: what the HTTP layer hands a channel, what comes
//! back, and the one `match` that picks the channel. Each channel's folder implements
//! [`Channel`] in its `inbound.rs`; CONTRIBUTING.md lists every place a new channel touches,
//! this file's [`channel`] among them.

use serde_json::Value;
use switchboard_domain::ChannelKind;

use crate::{email::Email, slack::Slack, telegram::Telegram, whatsapp::Whatsapp};

/// How far (seconds, either direction) a signed timestamp may be from now. Providers retry
/// for longer than this, but each retry is signed afresh, so a tighter window only rejects
/// replays, never genuine retries.
pub const REPLAY_WINDOW_SECS: i64 = 300;

/// The raw webhook request. Channels get the bytes exactly as received because every
/// provider signs the raw body; re-serialising parsed JSON would break the signatures.
#[derive(Debug, Clone, Copy)]
pub struct InboundRequest<'a> {
    /// Request headers, looked up case-insensitively.
    pub headers: &'a http::HeaderMap,
    /// The body exactly as received.
    pub body: &'a [u8],
    /// `PUBLIC_BASE_URL` + path + query as the provider called it: Twilio signs the URL,
    /// and behind a proxy the URL the server sees is not the one Twilio used.
    pub public_url: &'a str,
    /// Current Unix time in seconds, injected so replay-window checks are testable.
    pub now_unix: i64,
}

/// The outcome of a request that passed verification.
#[derive(Debug, Clone, PartialEq)]
pub enum Verified {
    /// Slack's `url_verification` handshake: answer 200 with this challenge as the body.
    /// Nothing is stored.
    Challenge(String),
    /// A provider event to commit to the inbox.
    Event(InboundEvent),
}

/// One provider event, as stored in `inbound_events`.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundEvent {
    /// The provider's own id for this delivery, so retries dedup: Slack `event_id`, Twilio
    /// `MessageSid`, Telegram `update_id`, email Message-ID (else the webhook id). Unique
    /// per connection only, so callers must scope it by connection.
    pub dedup_key: String,
    /// `None` for events that are acknowledged and stored but need no reply (bot echoes,
    /// edits, status callbacks, non-inbound email events), so they never reach the agent.
    pub message: Option<InboundMessage>,
    /// The provider payload as JSON (Twilio's form params as an object), kept for the job
    /// and for audits.
    pub payload: Value,
}

/// A customer message extracted from an event.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundMessage {
    /// Who the customer is on this channel: Slack user id, Twilio `From`
    /// (`whatsapp:+1…`), Telegram `from.id`, lowercased email address.
    pub customer_external_id: String,
    /// A display name when the provider sends one.
    pub customer_name: Option<String>,
    /// The message text. For email this may be empty: Resend's webhook carries metadata only,
    /// and the inbound job fetches the body by `payload.data.email_id`.
    pub text: String,
    /// Unique per message within the connection: Slack `{channel}:{ts}` (`ts` alone is only
    /// unique within one Slack channel), Twilio `MessageSid`, Telegram
    /// `{chat_id}:{message_id}`, email Message-ID.
    pub channel_message_id: String,
    /// What the outbound reply needs later: Slack `{channel, thread_ts}`, Twilio `{to}`,
    /// Telegram `{chat_id}`, email `{to, subject, in_reply_to}`.
    pub reply_to: Value,
}

/// Why a webhook was refused. Messages never carry secret values or signatures.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InboundError {
    /// A header needed for verification is absent (or not valid text).
    #[error("missing signature headers")]
    MissingSignature,
    /// The signature or token does not match the connection's secret.
    #[error("signature mismatch")]
    BadSignature,
    /// The signed timestamp is outside the replay window or not a number.
    #[error("timestamp outside the replay window")]
    StaleTimestamp,
    /// The request verified but its body is not a payload we understand.
    #[error("malformed payload: {0}")]
    Malformed(String),
    /// The connection's stored secrets lack a usable field: a server-side problem (answer
    /// 500), not the caller's. Names the field, never its value.
    #[error("connection secret `{0}` is missing or unusable")]
    Secret(&'static str),
}

/// One provider's inbound rules. Split in two so verification always runs on the raw body
/// before any parsing touches it.
pub trait Channel: Sync {
    /// The secret fields a connection must carry (SPEC §9), all non-empty strings.
    fn secret_fields(&self) -> &'static [&'static str];
    /// The one secret field that verifies webhooks (the others call the provider).
    fn inbound_secret_field(&self) -> &'static str;
    /// Refuses secrets that are present but can never work (names fields, never values).
    fn check_secrets(
        &self,
        _secrets: &serde_json::Map<String, Value>,
    ) -> Result<(), crate::SecretsError> {
        Ok(())
    }
    /// Authenticates the raw request against the connection's secrets, in constant time.
    fn verify(&self, secrets: &Value, req: &InboundRequest<'_>) -> Result<(), InboundError>;
    /// Turns an already verified request into a [`Verified`] outcome.
    fn parse(&self, req: &InboundRequest<'_>) -> Result<Verified, InboundError>;
}

/// The single place that maps a channel kind to its inbound rules and secrets.
pub fn channel(kind: ChannelKind) -> &'static dyn Channel {
    match kind {
        ChannelKind::Slack => &Slack,
        ChannelKind::Whatsapp => &Whatsapp,
        ChannelKind::Telegram => &Telegram,
        ChannelKind::Email => &Email,
    }
}

/// Verifies, then parses; the body is never parsed unless the signature holds, so a forged
/// request cannot reach the JSON parser or the inbox.
pub fn verify_and_parse(
    kind: ChannelKind,
    secrets: &Value,
    req: &InboundRequest<'_>,
) -> Result<Verified, InboundError> {
    let secrets = InboundSecrets {
        current: secrets,
        previous: None,
    };
    verify_and_parse_rotating(kind, secrets, req).map(|(verified, _)| verified)
}

/// A connection's secrets as its webhooks are verified during a rotation: the current ones
/// and, for a while, the value that [`crate::inbound_secret_field`] held before it was
/// replaced, which the provider may still be signing with.
#[derive(Debug, Clone, Copy)]
pub struct InboundSecrets<'a> {
    /// The secrets object (see [`crate::secret_fields`]).
    pub current: &'a Value,
    /// The replaced inbound secret, while it may still verify.
    pub previous: Option<PreviousSecret<'a>>,
}

/// A replaced inbound secret and when it stops verifying. Its `Debug` hides the value.
#[derive(Clone, Copy)]
pub struct PreviousSecret<'a> {
    /// The old value.
    pub value: &'a str,
    /// Unix seconds from which it no longer verifies: compared with the request's
    /// `now_unix` at every verification, so an expired value never verifies, whether or not
    /// anything has removed it yet.
    pub expires_unix: i64,
}

impl std::fmt::Debug for PreviousSecret<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PreviousSecret(.., expires_unix: {})", self.expires_unix)
    }
}

/// Which value of the inbound secret a request verified with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignedWith {
    /// The current one.
    Current,
    /// The replaced one, still within its overlap: the provider has not switched yet.
    Previous,
}

/// [`verify_and_parse`] with either value of a rotating inbound secret: the current one
/// first, then the previous one while it has not expired, and only when the current one
/// failed on the signature itself (a missing header or a stale timestamp is the same
/// refusal whatever the secret). A request that neither verifies gets the current secret's
/// refusal.
pub fn verify_and_parse_rotating(
    kind: ChannelKind,
    secrets: InboundSecrets<'_>,
    req: &InboundRequest<'_>,
) -> Result<(Verified, SignedWith), InboundError> {
    let adapter = channel(kind);
    let signed_with = match adapter.verify(secrets.current, req) {
        Ok(()) => SignedWith::Current,
        Err(InboundError::BadSignature) => {
            let previous = secrets
                .previous
                .filter(|p| req.now_unix < p.expires_unix && !p.value.is_empty())
                .ok_or(InboundError::BadSignature)?;
            let mut candidate = secrets.current.clone();
            candidate
                .as_object_mut()
                .ok_or(InboundError::BadSignature)?
                .insert(
                    crate::inbound_secret_field(kind).into(),
                    previous.value.into(),
                );
            adapter
                .verify(&candidate, req)
                .map_err(|_| InboundError::BadSignature)?;
            SignedWith::Previous
        }
        Err(other) => return Err(other),
    };
    Ok((adapter.parse(req)?, signed_with))
}

/// What [`cap_text`] appends to a text it shortened.
pub const TRUNCATED: &str = "\n[…truncated]";

/// `text` cut to at most `max_bytes` (on a character boundary, with [`TRUNCATED`] at the
/// end) so one huge message cannot bloat the conversation, the console or the agent's
/// prompt; the event's raw payload keeps the whole of it.
pub fn cap_text(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes.saturating_sub(TRUNCATED.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(TRUNCATED);
    text
}

/// A header as text; absent and non-text values are the same to a verifier.
pub(crate) fn header<'a>(req: &InboundRequest<'a>, name: &str) -> Option<&'a str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

/// A non-empty string field of the connection's secrets.
pub(crate) fn secret<'a>(secrets: &'a Value, field: &'static str) -> Result<&'a str, InboundError> {
    secrets
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(InboundError::Secret(field))
}

/// Rejects timestamps outside the replay window; an unparsable one cannot be shown fresh.
pub(crate) fn check_fresh(timestamp: &str, now_unix: i64) -> Result<(), InboundError> {
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| InboundError::StaleTimestamp)?;
    if now_unix.abs_diff(ts) > REPLAY_WINDOW_SECS.unsigned_abs() {
        return Err(InboundError::StaleTimestamp);
    }
    Ok(())
}

/// Parses a JSON body; the error says where it broke, never what the body held.
pub(crate) fn json_body(body: &[u8]) -> Result<Value, InboundError> {
    serde_json::from_slice(body).map_err(|e| {
        InboundError::Malformed(format!(
            "invalid JSON at line {} column {}",
            e.line(),
            e.column()
        ))
    })
}

/// Keeps a verified event whose envelope (dedup key) is sound but whose message part is
/// unusable, storing it with no message instead of refusing it: a refusal only makes the
/// provider retry something that can never succeed, and Telegram holds back every later
/// update meanwhile. The error names fields only, so it is safe to log.
pub(crate) fn lenient(
    channel: &'static str,
    dedup_key: &str,
    message: Result<Option<InboundMessage>, InboundError>,
) -> Option<InboundMessage> {
    message.unwrap_or_else(|error| {
        tracing::warn!(channel, dedup_key, %error, "inbound event stored without a message");
        None
    })
}

/// A required string field, or a `Malformed` naming it.
pub(crate) fn req_str<'a>(value: &'a Value, pointer: &str) -> Result<&'a str, InboundError> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .ok_or_else(|| InboundError::Malformed(format!("missing string {pointer}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_window_is_inclusive_and_symmetric() {
        assert_eq!(check_fresh("1000", 1300), Ok(()));
        assert_eq!(check_fresh("1300", 1000), Ok(()));
        assert_eq!(check_fresh("1000", 1301), Err(InboundError::StaleTimestamp));
        assert_eq!(check_fresh("1301", 1000), Err(InboundError::StaleTimestamp));
        assert_eq!(check_fresh("soon", 1000), Err(InboundError::StaleTimestamp));
    }

    #[test]
    fn long_texts_are_capped_on_a_character_boundary() {
        assert_eq!(cap_text("short".into(), 100), "short");
        let capped = cap_text("é".repeat(1000), 101);
        assert!(
            capped.len() <= 101 && capped.ends_with(TRUNCATED),
            "{capped}"
        );
        assert!(capped.starts_with("éé"));
    }

    #[test]
    fn a_replaced_inbound_secret_verifies_until_it_expires() {
        use crate::test_support::{NOW, headers, hmac_sha256, request};
        let body =
            br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"reaction_added"}}"#;
        let signed = |secret: &str| {
            let mut base = format!("v0:{NOW}:").into_bytes();
            base.extend_from_slice(body);
            let sig = format!("v0={}", hex::encode(hmac_sha256(secret.as_bytes(), &base)));
            headers(&[
                ("X-Slack-Request-Timestamp", &NOW.to_string()),
                ("X-Slack-Signature", &sig),
            ])
        };
        let current = serde_json::json!({"signing_secret": "new-secret", "bot_token": "xoxb"});
        let verify = |h: &http::HeaderMap, expires_unix: i64| {
            let secrets = InboundSecrets {
                current: &current,
                previous: Some(PreviousSecret {
                    value: "old-secret",
                    expires_unix,
                }),
            };
            verify_and_parse_rotating(ChannelKind::Slack, secrets, &request(h, body, "u"))
                .map(|(_, with)| with)
        };
        let (old, new, forged) = (signed("old-secret"), signed("new-secret"), signed("guess"));
        assert_eq!(verify(&new, NOW + 1), Ok(SignedWith::Current));
        assert_eq!(verify(&old, NOW + 1), Ok(SignedWith::Previous));
        assert_eq!(verify(&forged, NOW + 1), Err(InboundError::BadSignature));
        // Expired: refused from its expiry on, although it is still there.
        assert_eq!(verify(&old, NOW), Err(InboundError::BadSignature));
        assert_eq!(verify(&new, NOW), Ok(SignedWith::Current));
        // Without a previous secret, only the current one.
        let only = request(&old, body, "u");
        assert_eq!(
            verify_and_parse(ChannelKind::Slack, &current, &only),
            Err(InboundError::BadSignature)
        );
        // A refusal that is not about the secret is not retried with the old one.
        let missing = headers(&[("X-Slack-Request-Timestamp", &NOW.to_string())]);
        assert_eq!(
            verify(&missing, NOW + 1),
            Err(InboundError::MissingSignature)
        );
        assert!(
            !format!(
                "{:?}",
                PreviousSecret {
                    value: "old-secret",
                    expires_unix: 1
                }
            )
            .contains("old-secret")
        );
    }

    #[test]
    fn missing_secret_names_the_field_only() {
        let err = secret(&serde_json::json!({"bot_token": ""}), "bot_token").expect_err("empty");
        assert_eq!(err, InboundError::Secret("bot_token"));
    }
}
