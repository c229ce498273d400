//! What an alert is about, and the one place an alert leaves the pod. Raising one once
//! across pods (the claim) is `switchboard_jobs::alerts`; a caller whose own atomic step
//! already picked one pod (a breaker that opened) announces directly.

use serde_json::Value;

/// What an alert is about (the `alert` field, and the `alerts_raised_total` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertKind {
    /// Redis, where the shared rate limits live, is unreachable: pods limit on their own.
    RateLimitStorageDown,
    /// A pod lost its realtime pub/sub subscriptions.
    RealtimeAdapterDown,
    /// The agent failed more than 5 times in a row.
    AgentFailing,
    /// Pending queue items are past their SLA.
    BacklogPastSla,
    /// A scheduled run failed (or was abandoned after its retry died too).
    ScheduledRunFailed,
    /// A scheduled run's pod died and another pod retried the slot.
    ScheduledRunRetried,
    /// An outbound reply is dead: its attempts and dead-letter retries ran out.
    ReplyDead,
}

impl AlertKind {
    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::RateLimitStorageDown => "rate_limit_storage_down",
            AlertKind::RealtimeAdapterDown => "realtime_adapter_down",
            AlertKind::AgentFailing => "agent_failing",
            AlertKind::BacklogPastSla => "backlog_past_sla",
            AlertKind::ScheduledRunFailed => "scheduled_run_failed",
            AlertKind::ScheduledRunRetried => "scheduled_run_retried",
            AlertKind::ReplyDead => "reply_dead",
        }
    }
}

/// Sends an alert on: the one place alerts leave the pod (an error line with target
/// `switchboard::alert`, which Sentry captures, and `alerts_raised_total`), besides
/// `switchboard_jobs::alerts::reply_dead`. Callers whose own atomic step already picked one pod (a breaker that
/// opened) call it directly; everyone else goes through `switchboard_jobs::alerts::Alerts::raise`.
pub fn announce(kind: AlertKind, subject: &str, message: &str, details: &Value) {
    tracing::error!(
        target: "switchboard::alert",
        alert = kind.as_str(),
        subject,
        details = %details,
        "{message}"
    );
    metrics::counter!("alerts_raised_total", "alert" => kind.as_str()).increment(1);
}
