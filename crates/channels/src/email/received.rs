//! Resend's `email.received` webhook carries an email's metadata only, not its body. The
//! inbound job fetches the body from Resend's Received emails API
//! (`GET {RESEND_API_BASE}/emails/receiving/{email_id}`, the connection's API key as bearer)
//! before it stores the message.

use crate::outbound::{BodyError, read_capped};
use serde::Deserialize;
use std::time::Duration;
use url::Url;

/// How long one fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(15);

/// Largest answer read from Resend: a bigger email is stored with a note instead (the
/// stored text is capped far below this anyway). The answer holds the text and HTML parts
/// and headers only (attachments come as metadata and download links), and 16 MiB is far
/// above those of any email a person writes, while still bounding what one fetch can make a
/// pod hold.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Fetches received emails' bodies from Resend; cheap to clone.
#[derive(Clone)]
pub struct ReceivedEmails {
    http: reqwest::Client,
    base: Url,
}

impl std::fmt::Debug for ReceivedEmails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedEmails")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// Why a body could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Worth retrying later: a network error, a timeout, 429 or 5xx.
    #[error("Resend is unavailable: {0}")]
    Unavailable(String),
    /// Retrying will not help: Resend refused (unknown email, revoked key) or the
    /// connection is gone.
    #[error("{0}")]
    Refused(String),
}

/// The part of Resend's received email this needs.
#[derive(Debug, Deserialize)]
struct ReceivedEmail {
    text: Option<String>,
    html: Option<String>,
}

impl ReceivedEmails {
    /// A fetcher against `base` (`RESEND_API_BASE`).
    pub fn new(base: Url) -> Self {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self { http, base }
    }

    /// The plain-text body of received email `email_id`, read with the connection's
    /// `api_key`: its text part, else its HTML part as text, else empty.
    pub async fn fetch(&self, api_key: &str, email_id: &str) -> Result<String, FetchError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| FetchError::Refused("RESEND_API_BASE cannot take a path".into()))?
            .pop_if_empty()
            .extend(["emails", "receiving", email_id]);
        let response = self
            .http
            .get(url)
            .bearer_auth(api_key)
            .send()
            .await
            .map_err(|e| FetchError::Unavailable(e.without_url().to_string()))?;
        let status = response.status();
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(FetchError::Unavailable(format!("HTTP {}", status.as_u16())));
        }
        if !status.is_success() {
            return Err(FetchError::Refused(format!(
                "Resend answered HTTP {}",
                status.as_u16()
            )));
        }
        let body = read_bounded(response).await?;
        // Parsing a large email and turning its HTML into text is CPU work: it runs on the
        // blocking pool, never on the async threads every request and job share.
        tokio::task::spawn_blocking(move || {
            let email: ReceivedEmail = serde_json::from_slice(&body)
                .map_err(|e| FetchError::Unavailable(format!("unreadable answer: {e}")))?;
            Ok(match (email.text, email.html) {
                (Some(text), _) if !text.trim().is_empty() => text,
                (_, Some(html)) => super::html_to_text(&html),
                _ => String::new(),
            })
        })
        .await
        .map_err(|e| FetchError::Unavailable(format!("body conversion failed: {e}")))?
    }
}

/// The answer's body, refused past [`MAX_ANSWER_BYTES`] (a retry would not shrink it), and
/// at once when Resend declares more.
async fn read_bounded(response: reqwest::Response) -> Result<Vec<u8>, FetchError> {
    read_capped(response, MAX_ANSWER_BYTES)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge { cap } => FetchError::Refused(format!(
                "the email is larger than {} MiB",
                cap / (1024 * 1024)
            )),
            BodyError::Read(e) => FetchError::Unavailable(format!("unreadable answer: {e}")),
        })
}

#[cfg(test)]
mod tests {
    use super::{FetchError, MAX_ANSWER_BYTES, read_bounded};
    use crate::agent::fake_upstream::{Answer, serve};
    use std::time::Duration;

    /// How an answer of this shape is read, within a deadline far below the client's
    /// timeout: a reader that waits for a whole oversized body fails here.
    async fn read(answer: Answer) -> Result<Vec<u8>, FetchError> {
        let resend = serve(answer).await;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .expect("client");
        let response = client.get(&resend.url).send().await.expect("sent");
        tokio::time::timeout(Duration::from_secs(10), read_bounded(response))
            .await
            .expect("the cap ends the read")
    }

    fn refused(result: Result<Vec<u8>, FetchError>) {
        match result {
            Err(FetchError::Refused(reason)) => {
                assert_eq!(reason, "the email is larger than 16 MiB");
            }
            other => panic!("expected Refused, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_email_over_the_cap_is_refused_before_or_while_reading() {
        // Only four bytes ever arrive: only the declared length can refuse this in time.
        let declared = Answer::Declares {
            len: MAX_ANSWER_BYTES + 1,
            hold: true,
        };
        refused(read(declared).await);
        refused(read(Answer::Chunked(MAX_ANSWER_BYTES + 1)).await);
        refused(read(Answer::Endless).await);
    }

    #[tokio::test]
    async fn an_email_within_the_cap_is_read_and_a_cut_one_is_retried() {
        let email = br#"{"text": "Hello", "html": null}"#.to_vec();
        assert_eq!(
            read(Answer::Sized(email.clone())).await.expect("read"),
            email
        );
        let cut = Answer::Declares {
            len: 100,
            hold: false,
        };
        match read(cut).await {
            Err(FetchError::Unavailable(reason)) => {
                assert!(reason.starts_with("unreadable answer"), "{reason}");
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
}
