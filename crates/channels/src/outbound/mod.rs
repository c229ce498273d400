//! The outbound half every channel shares: one HTTP call per message part, answered with a
//! verdict the durable dispatch job can act on (accepted, retry later, give up).
//!
//! Nothing here retries or remembers: the caller records each accepted part in Postgres
//! before sending the next, so a crash or a retry never resends a part the provider
//! already took. That is also why any 2xx counts as accepted even when its body cannot be
//! read: calling again would message the customer twice. Reasons end up in logs, the
//! dead-letter table and the console, so they are redacted of every secret value.

mod body;
mod http;
mod split;
#[cfg(test)]
pub(crate) mod testkit;

pub use body::{BodyError, read_capped};
pub use http::PROVIDER_ANSWER_CAP;
pub(crate) use http::{Answer, retry_after, retryable_status};
pub use split::{max_chars, split};

use std::time::Duration;

use self::http::transport_failure;
use reqwest::{Client, RequestBuilder};
use serde_json::Value;
use switchboard_domain::ChannelKind;
use url::Url;

/// Where each provider's API lives. Named fields rather than four positional `Url`s, so
/// a test or config typo cannot silently swap two providers.
#[derive(Debug, Clone)]
pub struct ProviderBases {
    /// Slack Web API, normally `https://slack.com/api`.
    pub slack: Url,
    /// Twilio's REST API, which carries WhatsApp (its address is in `config/default.toml`).
    pub whatsapp: Url,
    /// Telegram Bot API, normally `https://api.telegram.org`.
    pub telegram: Url,
    /// Resend API, normally `https://api.resend.com`.
    pub resend: Url,
}

/// The provider clients, sharing one connection pool.
#[derive(Debug, Clone)]
pub struct Providers {
    client: Client,
    slack: Url,
    whatsapp: Url,
    telegram: Url,
    resend: Url,
}

/// One part of one outbox message, as the dispatch job holds it.
#[derive(Debug, Clone, Copy)]
pub struct PartRequest<'a> {
    /// Which provider to call.
    pub channel: ChannelKind,
    /// The connection's decrypted secrets (see [`crate::secret_fields`]).
    pub secrets: &'a Value,
    /// Where to answer, as the inbound parser stored it.
    pub reply_to: &'a Value,
    /// The customer on this channel. Today's providers address the customer through
    /// `reply_to` alone; this is here for callers' logs and for channels that may need it.
    pub customer_external_id: &'a str,
    /// This part's text, already within the channel's [`max_chars`].
    pub text: &'a str,
    /// Stable across retries of the same outbox row (the outbox id), for providers that
    /// deduplicate on it.
    pub idempotency_key: &'a str,
    /// Zero-based index of this part: only part 0 quotes the customer's message.
    pub part: usize,
    /// How many parts the message was split into.
    pub parts: usize,
}

/// What became of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartOutcome {
    /// The provider took the part. `provider_id` is its message id, or empty when the
    /// provider answered 2xx without a readable one (still accepted: see the module docs).
    Accepted {
        /// Slack `ts`, Twilio `sid`, Telegram `message_id`, Resend `id`.
        provider_id: String,
    },
    /// Worth trying again: rate limits, 5xx, timeouts, connection failures.
    Retry {
        /// How long the provider asked us to wait, when it said.
        after: Option<Duration>,
        /// Why, without secret values.
        reason: String,
        /// The HTTP status, when there was a response.
        status: Option<u16>,
    },
    /// Sending again cannot succeed without someone changing something.
    Permanent {
        /// Why, without secret values.
        reason: String,
        /// The HTTP status, when there was a response.
        status: Option<u16>,
    },
}

/// Why [`Providers::new`] failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// reqwest could not build its client (e.g. no TLS roots).
    #[error("building the provider HTTP client")]
    Client(#[source] reqwest::Error),
}

/// A request that cannot be made from the stored data; never worth retrying as is.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FieldError {
    #[error("{0} secrets lack a non-empty string `{1}`")]
    Secret(ChannelKind, &'static str),
    #[error("{0} reply_to lacks a usable `{1}`")]
    ReplyTo(ChannelKind, &'static str),
    #[error("the {0} API base URL cannot take a path")]
    Base(ChannelKind),
}

/// What each channel module provides: how to ask, and how to read the answer. `Sync`
/// because `send_part` holds one across an await and its future must stay `Send`.
pub(crate) trait Outbound: Sync {
    fn build(
        &self,
        client: &Client,
        base: &Url,
        req: &PartRequest<'_>,
    ) -> Result<RequestBuilder, FieldError>;
    fn classify(&self, answer: &Answer, req: &PartRequest<'_>) -> PartOutcome;
}

impl Providers {
    /// Clients against `bases`, each call bounded by `timeout` so a hung provider turns into
    /// a retry instead of a stuck job. reqwest is built without a bundled TLS provider: the
    /// process must have installed one (the binary does at start-up). Redirects are not
    /// followed: a provider never redirects a send, and following one would replay the
    /// POST somewhere nobody configured.
    pub fn new(bases: ProviderBases, timeout: Duration) -> Result<Self, BuildError> {
        let client = Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(BuildError::Client)?;
        let ProviderBases {
            slack,
            whatsapp,
            telegram,
            resend,
        } = bases;
        Ok(Self {
            client,
            slack,
            whatsapp,
            telegram,
            resend,
        })
    }

    /// Sends one part. Never panics and never errors: every failure is a verdict.
    pub async fn send_part(&self, req: &PartRequest<'_>) -> PartOutcome {
        let (base, api): (&Url, &dyn Outbound) = match req.channel {
            ChannelKind::Slack => (&self.slack, &crate::slack::outbound::Api),
            ChannelKind::Whatsapp => (&self.whatsapp, &crate::whatsapp::outbound::Api),
            ChannelKind::Telegram => (&self.telegram, &crate::telegram::outbound::Api),
            ChannelKind::Email => (&self.resend, &crate::email::outbound::Api),
        };
        let outcome = match api.build(&self.client, base, req) {
            Err(e) => PartOutcome::Permanent {
                reason: e.to_string(),
                status: None,
            },
            Ok(request) => match request.send().await {
                Ok(response) => api.classify(&Answer::read(response, req.channel).await, req),
                Err(e) => transport_failure(req.channel, &e),
            },
        };
        outcome.redacted(req.secrets)
    }
}

impl PartOutcome {
    /// Replaces every secret value in the reason: providers echo request data (Twilio
    /// names the account in its URLs, Telegram's URL *is* the bot token). Values under 4
    /// bytes are left alone: replacing them would garble the reason and hide nothing.
    fn redacted(mut self, secrets: &Value) -> Self {
        if let Self::Retry { reason, .. } | Self::Permanent { reason, .. } = &mut self {
            let values = secrets.as_object().into_iter().flat_map(|o| o.values());
            for secret in values.filter_map(Value::as_str).filter(|s| s.len() >= 4) {
                *reason = reason.replace(secret, "[redacted]");
            }
        }
        self
    }
}

/// `base` + `segments`, whether or not the base ends with a slash (`Url::join` would drop
/// the base's last segment, e.g. Slack's `/api`). Segments are percent-encoded.
pub(crate) fn endpoint(
    channel: ChannelKind,
    base: &Url,
    segments: &[&str],
) -> Result<Url, FieldError> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| FieldError::Base(channel))?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

/// A required secret, as a non-empty string.
pub(crate) fn secret<'a>(
    req: &PartRequest<'a>,
    field: &'static str,
) -> Result<&'a str, FieldError> {
    non_empty(req.secrets, field).ok_or(FieldError::Secret(req.channel, field))
}

/// A required `reply_to` field, as a non-empty string.
pub(crate) fn reply_str<'a>(
    req: &PartRequest<'a>,
    field: &'static str,
) -> Result<&'a str, FieldError> {
    non_empty(req.reply_to, field).ok_or(FieldError::ReplyTo(req.channel, field))
}

pub(crate) fn non_empty<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}
