//! Reading a provider's HTTP answer once and classifying what every provider shares:
//! which statuses are worth a retry, and what a transport failure (timeout, refused
//! connection) means. Each channel module reads its provider's own error shape on top.

use std::time::Duration;

use reqwest::Response;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;
use switchboard_domain::ChannelKind;

use super::PartOutcome;
use super::body::{BodyError, read_capped};

/// Largest provider answer read. A send is answered with a small JSON object: an id, a
/// status, an error code and message, and for Slack an echo of the text we sent (which
/// Slack cuts at 40 000 characters, so well under 1 MiB even escaped). 1 MiB fits all of
/// them and bounds what a broken or hostile endpoint can make a pod hold per send; a 2xx
/// past it would still count as accepted, only without the provider's message id.
pub const PROVIDER_ANSWER_CAP: usize = 1024 * 1024;

/// A provider's answer, read once, so each channel classifies plain data.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<Duration>,
    /// The body as JSON, `Null` when it was not JSON or could not be read.
    pub(crate) body: Value,
    /// The body as text, or why it could not be read.
    raw: Result<String, BodyError>,
}

impl Answer {
    /// An answer that cannot be read (over [`PROVIDER_ANSWER_CAP`], or cut off) is kept as
    /// a `Null` body, like one that is not JSON: its status alone decides, so a 2xx still
    /// counts as accepted (see the module docs of `outbound`).
    pub(crate) async fn read(response: Response, channel: ChannelKind) -> Self {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let raw = read_capped(response, PROVIDER_ANSWER_CAP)
            .await
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        if let Err(e) = &raw {
            tracing::warn!(%channel, status, error = %e, "unreadable provider answer");
        }
        let body = raw
            .as_deref()
            .ok()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null);
        Self {
            status,
            retry_after,
            body,
            raw,
        }
    }

    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The common reading of a failed call: 429, 408 and 5xx are worth retrying, any other
    /// status will fail the same way again. `detail` is the provider's own words.
    pub(crate) fn failure(&self, channel: ChannelKind, detail: &str) -> PartOutcome {
        let status = Some(self.status);
        let reason = format!("{channel} answered HTTP {}: {detail}", self.status);
        if retryable_status(self.status) {
            PartOutcome::Retry {
                after: self.retry_after,
                reason,
                status,
            }
        } else {
            PartOutcome::Permanent { reason, status }
        }
    }

    /// The start of the raw body, for providers whose error has no structured message.
    pub(crate) fn snippet(&self) -> String {
        let text = match &self.raw {
            Ok(text) => text.trim(),
            Err(e) => return format!("({e})"),
        };
        if text.is_empty() {
            "(empty body)".to_owned()
        } else {
            text.chars().take(200).collect()
        }
    }
}

/// Whether a failed call answered `status` is worth making again: a timeout (408), a rate
/// limit (429) or the provider's own trouble (5xx). Any other status fails the same way
/// again. Shared by every provider client, system mail's included.
pub(crate) fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

/// A `Retry-After` in seconds (the form every provider here sends).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
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

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::PROVIDER_ANSWER_CAP;
    use switchboard_domain::ChannelKind::{self, Slack, Telegram, Whatsapp};

    /// A `status` answer of `body` with a `pad` string making its JSON `size` bytes long.
    fn padded(status: u16, mut body: serde_json::Value, size: usize) -> Reply {
        body["pad"] = json!("");
        let pad = size - body.to_string().len();
        body["pad"] = json!("x".repeat(pad));
        Reply::new(status).set_body_json(body)
    }

    async fn send(channel: ChannelKind, reply: Reply) -> super::PartOutcome {
        let server = provider(reply).await;
        let secrets = json!({"bot_token": "xoxb-token", "account_sid": "AC1",
            "auth_token": "whatsapp-token", "from_number": "+1555"});
        let reply_to = json!({"channel": "D1", "chat_id": 5, "to": "+1415"});
        providers(&server.uri())
            .send_part(&part(channel, &secrets, &reply_to, "hi"))
            .await
    }

    #[tokio::test]
    async fn an_oversized_success_is_accepted_without_an_id() {
        // Like a 2xx that is not JSON: sending again would message the customer twice.
        let huge = padded(
            200,
            json!({"ok": true, "ts": "1.2"}),
            2 * PROVIDER_ANSWER_CAP,
        );
        assert_eq!(
            verdict(&send(Slack, huge).await),
            ("accepted", None, None, "")
        );
    }

    #[tokio::test]
    async fn an_oversized_failure_is_classified_by_its_status() {
        let refusal = json!({"code": 21211, "message": "The 'To' number is not valid"});
        let huge = |status| {
            padded(status, refusal.clone(), 2 * PROVIDER_ANSWER_CAP)
                .insert_header("Retry-After", "9")
        };
        let out = send(Whatsapp, huge(503)).await;
        let (kind, after, status, reason) = verdict(&out);
        assert_eq!((kind, after, status), ("retry", Some(9), Some(503)));
        assert_eq!(
            reason,
            "whatsapp answered HTTP 503: (the answer is larger than the 1 MiB cap)"
        );
        let out = send(Whatsapp, huge(400)).await;
        let (kind, _, status, reason) = verdict(&out);
        assert_eq!((kind, status), ("permanent", Some(400)));
        assert!(
            reason.ends_with("(the answer is larger than the 1 MiB cap)"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn a_large_answer_within_the_cap_is_read() {
        let answer = json!({"ok": true, "result": {"message_id": 42}});
        let big = padded(200, answer, PROVIDER_ANSWER_CAP);
        assert_eq!(
            verdict(&send(Telegram, big).await),
            ("accepted", None, None, "42")
        );
    }
}
