//! The alert kinds, their severities and runbooks, and the log line every alert leaves.
//! Incidents (one open per kind and scope across pods, raised and resolved) and their
//! delivery to Slack, PagerDuty and webhooks are `switchboard_jobs::alerts`.

use crate::kinds::spelled;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

spelled! {
    /// How urgent an alert is; each sink takes those at or above its minimum.
    pub enum Severity in "text" {
        /// Worth knowing; nobody needs to act now.
        Info = "info",
        /// Someone should look during working hours.
        Warning = "warning",
        /// Someone should act now.
        Critical = "critical",
    }
}

impl PartialOrd for Severity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Severity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let rank = |s: &Severity| Severity::ALL.iter().position(|v| v == s);
        rank(self).cmp(&rank(other))
    }
}

spelled! {
    /// What an alert is about (`alert_incidents.kind`, the `alert` log field and the
    /// `alerts_raised_total` label). [`AlertKind::severity`], [`AlertKind::meaning`] and
    /// [`AlertKind::runbook`] make the table OPERATIONS shows.
    pub enum AlertKind in "text" {
        /// Redis, where the shared rate limits live, is unreachable: pods limit on their own.
        RateLimitStorageDown = "rate_limit_storage_down",
        /// A pod lost its realtime pub/sub subscriptions.
        RealtimeAdapterDown = "realtime_adapter_down",
        /// The agent failed several probes in a row, or its shared breaker is open.
        AgentFailing = "agent_failing",
        /// Pending queue items are past their SLA.
        BacklogPastSla = "backlog_past_sla",
        /// A scheduled run failed (or was abandoned after its retry died too).
        ScheduledRunFailed = "scheduled_run_failed",
        /// A scheduled run's pod died and another pod retried the slot.
        ScheduledRunRetried = "scheduled_run_retried",
        /// An outbound reply is dead: its attempts and dead-letter retries ran out.
        ReplyDead = "reply_dead",
        /// The inbound backlog or recent failures passed their thresholds.
        QueueBacklog = "queue_backlog",
        /// An org's retention purge is more than a day behind its window.
        RetentionBehind = "retention_behind",
        /// An expert corrected a reply the org's autopilot sent.
        AutopilotUndone = "autopilot_undone",
    }
}

impl AlertKind {
    /// How urgent it is.
    pub fn severity(self) -> Severity {
        match self {
            AlertKind::RateLimitStorageDown
            | AlertKind::RealtimeAdapterDown
            | AlertKind::AgentFailing
            | AlertKind::QueueBacklog => Severity::Critical,
            AlertKind::BacklogPastSla
            | AlertKind::ScheduledRunFailed
            | AlertKind::ReplyDead
            | AlertKind::RetentionBehind
            | AlertKind::AutopilotUndone => Severity::Warning,
            AlertKind::ScheduledRunRetried => Severity::Info,
        }
    }

    /// What it means, in a sentence, and when it resolves.
    pub fn meaning(self) -> &'static str {
        match self {
            AlertKind::RateLimitStorageDown => {
                "Redis is unreachable for the rate limiter: each pod limits on its own share. \
                 Resolves when a pod reaches Redis again."
            }
            AlertKind::RealtimeAdapterDown => {
                "A pod lost its Socket.IO pub/sub subscriptions: its sockets miss other pods' \
                 events until it re-subscribes. One per pod; resolves when it re-subscribes."
            }
            AlertKind::AgentFailing => {
                "The drafting agent failed several probes in a row or its breaker is open: \
                 new messages wait without a draft. Resolves on the next good probe."
            }
            AlertKind::BacklogPastSla => {
                "An org has pending items past their SLA. One per org; resolves when none is \
                 overdue."
            }
            AlertKind::ScheduledRunFailed => {
                "A scheduled job's run failed. One per job; resolves when the job next \
                 succeeds."
            }
            AlertKind::ScheduledRunRetried => {
                "A pod died during a scheduled run and another pod retried the slot. One per \
                 job; resolves when the job next succeeds."
            }
            AlertKind::ReplyDead => {
                "A reply could not be delivered after all its retries; the org's account \
                 manager is told. One per reply; resolves when an admin retries it."
            }
            AlertKind::QueueBacklog => {
                "More inbound events wait in the inbox, or more failed in the last 5 minutes, \
                 than ALERT_QUEUE_WAITING / ALERT_QUEUE_FAILED. Resolves below both."
            }
            AlertKind::RetentionBehind => {
                "An org holds messages more than a day older than its retention window: the \
                 purge falls behind, or replies or live items hold them. One per org; resolves \
                 when none is that old."
            }
            AlertKind::AutopilotUndone => {
                "An expert wrote to a customer within 10 minutes of a reply the org's \
                 autopilot sent them: a correction, so its threshold may be too low. One per \
                 org; resolves when an admin changes or pauses the org's autopilot."
            }
        }
    }

    /// The anchor of its runbook in docs/OPERATIONS.md.
    pub fn runbook(self) -> String {
        format!(
            "docs/OPERATIONS.md#alert-{}",
            self.as_str().replace('_', "-")
        )
    }
}

/// The alert's log line: an error with target `switchboard::alert`, which Sentry captures,
/// and `alerts_raised_total`. Written by the pod that opened the incident (or, when
/// Postgres cannot record one, by the pod that won the Redis claim).
pub fn announce(kind: AlertKind, subject: &str, message: &str, details: &Value) {
    tracing::error!(
        target: "switchboard::alert",
        alert = kind.as_str(),
        severity = kind.severity().as_str(),
        subject,
        details = %details,
        "{message}"
    );
    metrics::counter!("alerts_raised_total", "alert" => kind.as_str()).increment(1);
}

#[cfg(test)]
mod tests {
    use super::{AlertKind, Severity};

    #[test]
    fn severities_order_from_info_to_critical() {
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Critical);
        assert_eq!(
            AlertKind::AgentFailing.runbook(),
            "docs/OPERATIONS.md#alert-agent-failing"
        );
    }
}
