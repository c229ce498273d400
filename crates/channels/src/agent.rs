//! The drafting agent client: Switchboard's small JSON contract or any OpenAI-compatible
//! chat-completions endpoint, with retries and a breaker shared by all pods.

use crate::outbound::read_capped;
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use switchboard_config::{AgentMode, Config};
use switchboard_coord::Redis;
use switchboard_coord::breaker::{Breaker, BreakerConfig};
use switchboard_domain::Author;
use switchboard_domain::backoff::Backoff;
use switchboard_domain::trace;
use tracing::Instrument;
use tracing::field::Empty;
use url::Url;
use uuid::Uuid;

/// Waits between attempts on a retryable answer (SPEC §6: 1 s, 2 s, 4 s).
pub const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(4)).exact();
/// Attempts in all: the first, and one after each of [`RETRY`]'s three waits.
const ATTEMPTS: u32 = 4;

/// Largest agent answer read. A draft is one support reply plus a few numbers (the
/// contract) or one chat completion with its usage block: tens of KiB at most. 1 MiB is far
/// above any reply an expert would send, and bounds what a broken or hostile agent can make a
/// pod hold per draft.
pub const AGENT_ANSWER_CAP: usize = 1024 * 1024;

/// One line of conversation given to the agent.
#[derive(Debug, Clone, Serialize)]
pub struct ChatLine {
    /// Who wrote it.
    pub role: Author,
    /// The text.
    pub text: String,
}

/// What the agent proposes.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    /// Reply text.
    pub reply: String,
    /// The agent's confidence in [0, 1], when it gives one.
    pub confidence: Option<f32>,
    /// What the call cost, when known.
    pub cost_usd: Option<f64>,
}

/// Why no draft came back.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No `AGENT_URL` is configured.
    #[error("AGENT_URL is not configured")]
    NotConfigured,
    /// The shared breaker is open: the agent failed repeatedly on some pod.
    #[error("agent circuit breaker is open")]
    BreakerOpen,
    /// The agent kept failing after the retries.
    #[error("agent failed: {0}")]
    Failed(#[source] CallError),
}

/// Why one call to the agent failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer: refused, reset, timed out.
    #[error("request failed: {0}")]
    Transport(#[source] reqwest::Error),
    /// An error status.
    #[error("agent answered {0}")]
    Status(StatusCode),
    /// The answer could not be read (too large, cut off) or is not JSON.
    #[error("unreadable agent answer: {0}")]
    Unreadable(String),
    /// JSON, but not the contract's shape.
    #[error("agent answer does not match the contract: {0}")]
    Contract(#[source] serde_json::Error),
    /// An OpenAI-style answer without a reply.
    #[error("no choices[0].message.content in the answer")]
    NoContent,
}

impl CallError {
    /// Whether asking again may help: no answer, or the agent said it is busy or away.
    /// An unusable answer would come back the same.
    fn retryable(&self) -> bool {
        match self {
            CallError::Transport(_) => true,
            CallError::Status(status) => matches!(
                *status,
                StatusCode::TOO_MANY_REQUESTS
                    | StatusCode::BAD_GATEWAY
                    | StatusCode::SERVICE_UNAVAILABLE
                    | StatusCode::GATEWAY_TIMEOUT
            ),
            CallError::Unreadable(_) | CallError::Contract(_) | CallError::NoContent => false,
        }
    }
}

/// The Switchboard contract's request (`POST {AGENT_URL}/v1/chat`).
#[derive(Serialize)]
struct ContractRequest<'a> {
    org_id: Uuid,
    conversation_id: Uuid,
    messages: &'a [ChatLine],
}

/// An OpenAI-compatible chat completion request.
#[derive(Serialize)]
struct CompletionRequest<'a> {
    model: &'a str,
    messages: Vec<CompletionMessage<'a>>,
}

#[derive(Serialize)]
struct CompletionMessage<'a> {
    role: &'static str,
    content: &'a str,
}

/// What the OpenAI-compatible agent is told before the conversation.
const SYSTEM_PROMPT: &str = "You draft replies for a customer-support expert. Reply to the customer's last message concisely and politely.";

/// Why a health probe of the agent failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// `AGENT_URL` is not set.
    #[error("no agent configured")]
    NotConfigured,
    /// The agent answered with a server error.
    #[error("agent answered {0}")]
    Status(u16),
    /// No answer (refused, timed out).
    #[error("agent unreachable: {0}")]
    Transport(reqwest::Error),
}

/// Talks to `AGENT_URL`.
#[derive(Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    url: Option<Url>,
    mode: AgentMode,
    api_key: Option<SecretString>,
    model: String,
    breaker: Breaker,
}

#[derive(Deserialize)]
struct ContractReply {
    reply: String,
    #[serde(default)]
    confidence: Option<f32>,
    #[serde(default)]
    cost_usd: Option<f64>,
}

impl AgentClient {
    /// A client for the configured agent, with the `agent` breaker in Redis.
    pub fn new(config: &Config, redis: Redis) -> Self {
        crate::install_tls_provider();
        let http = reqwest::Client::builder()
            .timeout(config.agent.timeout)
            .build()
            .unwrap_or_default();
        Self {
            http,
            url: config.agent.url.clone(),
            mode: config.agent.mode,
            api_key: config.agent.api_key.clone(),
            model: config.agent.model.clone(),
            breaker: Breaker::new(redis, "agent", BreakerConfig::default()),
        }
    }

    /// One cheap request to the agent (its root, or `/v1/models` for OpenAI-compatible
    /// agents), for the `agent-health` job: any answer below 500 means it is there.
    pub async fn probe(&self, timeout: Duration) -> Result<(), ProbeError> {
        let base = self.url.as_ref().ok_or(ProbeError::NotConfigured)?;
        let url = match self.mode {
            AgentMode::Switchboard => base.to_string(),
            AgentMode::Openai => join(base, "/v1/models"),
        };
        let mut request = self.http.get(url).timeout(timeout);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let response = request
            .send()
            .await
            .map_err(|e| ProbeError::Transport(e.without_url()))?;
        if response.status().is_server_error() {
            return Err(ProbeError::Status(response.status().as_u16()));
        }
        Ok(())
    }

    /// The shared breaker (for health reporting and tests).
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// Asks for a draft, retrying 429/502/503/504, timeouts and connection errors after
    /// 1 s, 2 s and 4 s. Every failed attempt counts against the shared breaker.
    pub async fn draft(
        &self,
        org_id: Uuid,
        conversation_id: Uuid,
        history: &[ChatLine],
    ) -> Result<Draft, AgentError> {
        let url = self.url.as_ref().ok_or(AgentError::NotConfigured)?;
        // The agent is told the trace (`traceparent`) so that its own spans join it.
        let span = tracing::info_span!(
            "agent_call",
            otel.kind = "client",
            agent.mode = self.mode.as_str(),
            attempt = Empty,
            outcome = Empty,
            http.response.status_code = Empty,
            otel.status_code = Empty,
        );
        let drafted = self
            .attempts(url, org_id, conversation_id, history)
            .instrument(span.clone())
            .await;
        span.record(
            "outcome",
            match &drafted {
                Ok(_) => "drafted",
                Err(AgentError::BreakerOpen) => "breaker_open",
                Err(_) => "failed",
            },
        );
        if drafted.is_err() {
            span.record("otel.status_code", "ERROR");
        }
        drafted
    }

    /// [`AgentClient::draft`]'s attempts, in its span.
    async fn attempts(
        &self,
        url: &Url,
        org_id: Uuid,
        conversation_id: Uuid,
        history: &[ChatLine],
    ) -> Result<Draft, AgentError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            tracing::Span::current().record("attempt", attempt);
            // A breaker Redis cannot answer is treated as closed: the agent call is the work.
            if self.breaker.is_open().await.unwrap_or(false) {
                return Err(AgentError::BreakerOpen);
            }
            match self.call(url, org_id, conversation_id, history).await {
                Ok(draft) => {
                    if let Err(e) = self.breaker.record_success().await {
                        tracing::warn!(error = %e, "could not reset agent breaker");
                    }
                    return Ok(draft);
                }
                Err(error) => {
                    match self.breaker.record_failure().await {
                        // The `agent_failing` incident is the agent-health job's: it sees
                        // the open breaker on its next probe.
                        Ok(outcome) if outcome.opened => tracing::warn!(
                            failures = outcome.failures,
                            "agent circuit breaker opened"
                        ),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "could not record agent failure"),
                    }
                    if !error.retryable() || attempt == ATTEMPTS {
                        return Err(AgentError::Failed(error));
                    }
                    tracing::warn!(attempt, %error, "agent call failed, retrying");
                    tokio::time::sleep(RETRY.delay(attempt)).await;
                }
            }
        }
    }

    /// One attempt.
    async fn call(
        &self,
        base: &Url,
        org_id: Uuid,
        conversation_id: Uuid,
        history: &[ChatLine],
    ) -> Result<Draft, CallError> {
        let request = match self.mode {
            AgentMode::Switchboard => {
                self.http
                    .post(join(base, "v1/chat"))
                    .json(&ContractRequest {
                        org_id,
                        conversation_id,
                        messages: history,
                    })
            }
            AgentMode::Openai => self
                .http
                .post(join(base, "v1/chat/completions"))
                .json(&self.completion_request(history)),
        };
        let request = match &self.api_key {
            Some(key) => request.bearer_auth(key.expose_secret()),
            None => request,
        };
        let request = match trace::current() {
            Some(parent) => request.header(trace::HEADER, parent.to_string()),
            None => request,
        };
        let response = request
            .send()
            .await
            .map_err(|e| CallError::Transport(e.without_url()))?;
        let status = response.status();
        tracing::Span::current().record("http.response.status_code", status.as_u16());
        if !status.is_success() {
            return Err(CallError::Status(status));
        }
        // An answer too large to read is no more usable than one that is not JSON, and
        // asking again would bring the same answer: a failure, not retried.
        let body = read_capped(response, AGENT_ANSWER_CAP)
            .await
            .map_err(|e| CallError::Unreadable(causes(&e)))?;
        let value: Value =
            serde_json::from_slice(&body).map_err(|e| CallError::Unreadable(e.to_string()))?;
        match self.mode {
            AgentMode::Switchboard => serde_json::from_value::<ContractReply>(value)
                .map(|r| Draft {
                    reply: r.reply,
                    confidence: r.confidence,
                    cost_usd: r.cost_usd,
                })
                .map_err(CallError::Contract),
            AgentMode::Openai => value["choices"][0]["message"]["content"]
                .as_str()
                .map(|reply| Draft {
                    reply: reply.to_owned(),
                    confidence: None,
                    cost_usd: None,
                })
                .ok_or(CallError::NoContent),
        }
    }

    fn completion_request<'a>(&'a self, history: &'a [ChatLine]) -> CompletionRequest<'a> {
        let system = CompletionMessage {
            role: "system",
            content: SYSTEM_PROMPT,
        };
        let lines = history.iter().map(|line| CompletionMessage {
            role: match line.role {
                Author::Customer => "user",
                Author::Agent | Author::Expert => "assistant",
            },
            content: &line.text,
        });
        CompletionRequest {
            model: &self.model,
            messages: std::iter::once(system).chain(lines).collect(),
        }
    }
}

/// `error` and its causes on one line, for failures that end up as text.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn join(base: &Url, path: &str) -> String {
    format!("{}/{path}", base.as_str().trim_end_matches('/'))
}

#[cfg(test)]
pub(crate) mod fake_upstream;
#[cfg(test)]
mod tests;
