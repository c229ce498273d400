//! Realtime events (SPEC §9 names) and their payloads.
//!
//! A flow stores its events in the event outbox inside the transaction that causes them;
//! the realtime relay numbers them per org and publishes them. Some payloads are built in
//! SQL (`jsonb_build_object` inside a flow's statement); the types here are the contract
//! those statements follow, and the tests that read events deserialize into them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

/// The Socket.IO event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A new expert-queue item.
    QueueItemCreated,
    /// Any change of a queue item (state, draft, claim).
    QueueItemUpdated,
    /// A new message in a conversation (either direction).
    MessageCreated,
    /// A reply was released or written by an expert and queued for delivery.
    AgentMessageSent,
    /// An outbound message's delivery status changed.
    MessageStatusUpdated,
    /// A scheduled report (daily summary, weekly report, review summary) was stored.
    ReportReady,
}

impl EventKind {
    /// Every kind, in a stable order.
    pub const ALL: [EventKind; 6] = [
        EventKind::QueueItemCreated,
        EventKind::QueueItemUpdated,
        EventKind::MessageCreated,
        EventKind::AgentMessageSent,
        EventKind::MessageStatusUpdated,
        EventKind::ReportReady,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::QueueItemCreated => "queue_item_created",
            EventKind::QueueItemUpdated => "queue_item_updated",
            EventKind::MessageCreated => "message_created",
            EventKind::AgentMessageSent => "agent_message_sent",
            EventKind::MessageStatusUpdated => "message_status_updated",
            EventKind::ReportReady => "report_ready",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventKind {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or(())
    }
}

/// `queue_item_created` / `queue_item_updated`: enough for a console row to update in place
/// or decide to refetch `GET /expert-queue/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QueueItemEvent {
    /// The item.
    pub id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The state after the change.
    pub status: crate::QueueStatus,
    /// The version after the change.
    pub version: i32,
    /// Who holds it, if anyone.
    pub claimed_by: Option<Uuid>,
    /// Whether the draft needs review (the agent fell back).
    pub flagged_for_review: bool,
}

/// `message_created`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MessageCreated {
    /// The conversation.
    pub conversation_id: Uuid,
    /// The new message.
    pub message_id: Uuid,
}

/// A message as the console shows it in an event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MessageSummary {
    /// The message.
    pub id: Uuid,
    /// `customer`, `agent` or `expert`.
    pub author: String,
    /// The text.
    pub body: String,
    /// `queued`, `sent`, `failed`, `dead` for outbound messages.
    pub delivery_status: Option<String>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
}

/// `agent_message_sent`: a reply left the expert's hands (release or respond).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AgentMessageSent {
    /// The queue item that was released.
    pub queue_item_id: Uuid,
    /// The conversation.
    pub conversation_id: Uuid,
    /// The outbound message, with its delivery status.
    pub message: MessageSummary,
}

/// `message_status_updated`: the dispatch job recorded a provider's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MessageStatusUpdated {
    /// The conversation.
    pub conversation_id: Uuid,
    /// The outbound message.
    pub message_id: Uuid,
    /// `sent`, `retry`, `failed` or `dead`.
    pub delivery_status: String,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// When the status changed. Also keeps repeated transitions (a retry after a retry)
    /// distinct: the realtime log treats identical payloads as one event.
    pub at: DateTime<Utc>,
}

/// `report_ready`: a scheduled report was stored; `GET /reports?kind=` has it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReportReady {
    /// The report.
    pub report_id: Uuid,
    /// `daily_summary`, `weekly_report` or `review_summary`.
    pub kind: String,
    /// Start of the period covered.
    pub period_start: DateTime<Utc>,
    /// End of the period covered.
    pub period_end: DateTime<Utc>,
}

/// The realtime side as the flows see it.
pub trait Emitter: Send + Sync {
    /// Stores an event outside any business transaction, in call order per pod, and has it
    /// delivered. For events a flow's own transaction cannot carry (and for tools and
    /// tests); a flow with a transaction stores its events in it instead.
    fn emit(&self, org_id: Uuid, event: EventKind, payload: Value);
    /// Events were committed to the event outbox: deliver them now rather than at the next
    /// poll.
    fn wake(&self);
}
