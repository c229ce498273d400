//! Reading a provider's HTTP answer once and classifying what every provider shares:
//! which statuses are worth a retry, and what a transport failure (timeout, refused
//! connection) means. Each channel module reads its provider's own error shape on top.

use std::time::Duration;

use reqwest::{Response, header::RETRY_AFTER};
use serde_json::Value;
use switchboard_domain::ChannelKind;

use super::PartOutcome;

/// A provider's answer, read once, so each channel classifies plain data.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) retry_after: Option<Duration>,
    /// The body as JSON, `Null` when it was not JSON.
    pub(super) body: Value,
    raw: String,
}

impl Answer {
    pub(super) async fn read(response: Response) -> Self {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let raw = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
        Self {
            status,
            retry_after,
            body,
            raw,
        }
    }

    pub(super) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The common reading of a failed call: 429, 408 and 5xx are worth retrying, any other
    /// status will fail the same way again. `detail` is the provider's own words.
    pub(super) fn failure(&self, channel: ChannelKind, detail: &str) -> PartOutcome {
        let status = Some(self.status);
        let reason = format!("{channel} answered HTTP {}: {detail}", self.status);
        match self.status {
            408 | 429 | 500..=599 => PartOutcome::Retry {
                after: self.retry_after,
                reason,
                status,
            },
            _ => PartOutcome::Permanent { reason, status },
        }
    }

    /// The start of the raw body, for providers whose error has no structured message.
    pub(super) fn snippet(&self) -> String {
        let text = self.raw.trim();
        if text.is_empty() {
            "(empty body)".to_owned()
        } else {
            text.chars().take(200).collect()
        }
    }
}

/// Timeouts and connection failures might succeed next time. The URL is left out of the
/// reason because Telegram's carries the bot token.
pub(super) fn transport_failure(channel: ChannelKind, error: &reqwest::Error) -> PartOutcome {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    let mut reason = format!("{channel} request {what}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        reason.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    PartOutcome::Retry {
        after: None,
        reason,
        status: None,
    }
}
