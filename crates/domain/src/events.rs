//! Realtime events (SPEC §9 names) and their payloads.
//!
//! A flow stores its events in the event outbox inside the transaction that causes them;
//! the realtime relay numbers them per org and publishes them. [`Event`] pairs each name
//! with its payload type and is the only way to emit. The inbound job builds its payloads in
//! SQL (`jsonb_build_object` inside its one statement, for speed); the payload types refuse
//! unknown fields, and [`Event::parse`] in the tests that read those events checks the SQL
//! against them.

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
    /// An expert added an internal note to a conversation (for the team only).
    NoteAdded,
    /// A customer was erased: the conversation, its queue item and its messages are gone.
    ConversationErased,
}

impl EventKind {
    /// Every kind, in a stable order.
    pub const ALL: [EventKind; 8] = [
        EventKind::QueueItemCreated,
        EventKind::QueueItemUpdated,
        EventKind::MessageCreated,
        EventKind::AgentMessageSent,
        EventKind::MessageStatusUpdated,
        EventKind::ReportReady,
        EventKind::NoteAdded,
        EventKind::ConversationErased,
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
            EventKind::NoteAdded => "note_added",
            EventKind::ConversationErased => "conversation_erased",
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, sqlx::FromRow, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
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
    /// `auto_pending`: when the draft sends itself (a console counts down to it).
    #[serde(default)]
    pub send_at: Option<chrono::DateTime<chrono::Utc>>,
    /// `auto_pending`: the rule of the org's autopilot that admitted the draft.
    #[serde(default)]
    pub autopilot_rule: Option<String>,
}

/// `message_created`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageCreated {
    /// The conversation.
    pub conversation_id: Uuid,
    /// The new message.
    pub message_id: Uuid,
}

/// A message as the console shows it in an event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageSummary {
    /// The message.
    pub id: Uuid,
    /// Who wrote it.
    pub author: crate::Author,
    /// The text.
    pub body: String,
    /// For outbound messages.
    pub delivery_status: Option<crate::DeliveryStatus>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
}

/// `agent_message_sent`: a reply left the expert's hands (release or respond).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentMessageSent {
    /// The queue item that was released.
    pub queue_item_id: Uuid,
    /// The conversation.
    pub conversation_id: Uuid,
    /// The outbound message, with its delivery status.
    pub message: MessageSummary,
}

/// `message_status_updated`: the dispatch job recorded a provider's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageStatusUpdated {
    /// The conversation.
    pub conversation_id: Uuid,
    /// The outbound message.
    pub message_id: Uuid,
    /// The new status.
    pub delivery_status: crate::DeliveryStatus,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// When the status changed. Also keeps repeated transitions (a retry after a retry)
    /// distinct: the realtime log treats identical payloads as one event.
    pub at: DateTime<Utc>,
}

/// `report_ready`: a scheduled report was stored; `GET /reports?kind=` has it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportReady {
    /// The report.
    pub report_id: Uuid,
    /// Which report.
    pub kind: crate::ReportKind,
    /// Start of the period covered.
    pub period_start: DateTime<Utc>,
    /// End of the period covered.
    pub period_end: DateTime<Utc>,
}

/// `note_added`: an internal note, whole, so other experts' consoles show it at once. Goes
/// to the org's console sockets only; no customer or agent path reads events.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteAdded {
    /// The note.
    pub id: Uuid,
    /// The conversation.
    pub conversation_id: Uuid,
    /// Who wrote it.
    pub author_user_id: Option<Uuid>,
    /// The author's email, when known.
    pub author_email: Option<String>,
    /// The text.
    pub body: String,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

/// `conversation_erased`: the customer of this conversation was erased, so its queue item,
/// messages and notes are gone; consoles drop them. Events stored earlier for the
/// conversation are rewritten to this one, so a replay keeps its numbers and shows no text.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationErased {
    /// The conversation that is gone.
    pub conversation_id: Uuid,
    /// Its queue item, if it had one live.
    pub queue_item_id: Option<Uuid>,
}

/// A realtime event with its payload: the only thing a flow can emit or store in the event
/// outbox, so a payload always matches its name.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `queue_item_created`.
    QueueItemCreated(QueueItemEvent),
    /// `queue_item_updated`.
    QueueItemUpdated(QueueItemEvent),
    /// `message_created`.
    MessageCreated(MessageCreated),
    /// `agent_message_sent`.
    AgentMessageSent(AgentMessageSent),
    /// `message_status_updated`.
    MessageStatusUpdated(MessageStatusUpdated),
    /// `report_ready`.
    ReportReady(ReportReady),
    /// `note_added`.
    NoteAdded(NoteAdded),
    /// `conversation_erased`.
    ConversationErased(ConversationErased),
}

impl Event {
    /// Its name on the wire.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::QueueItemCreated(_) => EventKind::QueueItemCreated,
            Event::QueueItemUpdated(_) => EventKind::QueueItemUpdated,
            Event::MessageCreated(_) => EventKind::MessageCreated,
            Event::AgentMessageSent(_) => EventKind::AgentMessageSent,
            Event::MessageStatusUpdated(_) => EventKind::MessageStatusUpdated,
            Event::ReportReady(_) => EventKind::ReportReady,
            Event::NoteAdded(_) => EventKind::NoteAdded,
            Event::ConversationErased(_) => EventKind::ConversationErased,
        }
    }

    /// Its payload as stored and sent: the one place events are serialized.
    pub fn payload(&self) -> Result<Value, serde_json::Error> {
        match self {
            Event::QueueItemCreated(p) | Event::QueueItemUpdated(p) => serde_json::to_value(p),
            Event::MessageCreated(p) => serde_json::to_value(p),
            Event::AgentMessageSent(p) => serde_json::to_value(p),
            Event::MessageStatusUpdated(p) => serde_json::to_value(p),
            Event::ReportReady(p) => serde_json::to_value(p),
            Event::NoteAdded(p) => serde_json::to_value(p),
            Event::ConversationErased(p) => serde_json::to_value(p),
        }
    }

    /// Reads a stored event back (tests, tools): `None` when the payload does not have the
    /// shape its name promises.
    pub fn parse(kind: EventKind, payload: Value) -> Option<Event> {
        let event = match kind {
            EventKind::QueueItemCreated => {
                Event::QueueItemCreated(serde_json::from_value(payload).ok()?)
            }
            EventKind::QueueItemUpdated => {
                Event::QueueItemUpdated(serde_json::from_value(payload).ok()?)
            }
            EventKind::MessageCreated => {
                Event::MessageCreated(serde_json::from_value(payload).ok()?)
            }
            EventKind::AgentMessageSent => {
                Event::AgentMessageSent(serde_json::from_value(payload).ok()?)
            }
            EventKind::MessageStatusUpdated => {
                Event::MessageStatusUpdated(serde_json::from_value(payload).ok()?)
            }
            EventKind::ReportReady => Event::ReportReady(serde_json::from_value(payload).ok()?),
            EventKind::NoteAdded => Event::NoteAdded(serde_json::from_value(payload).ok()?),
            EventKind::ConversationErased => {
                Event::ConversationErased(serde_json::from_value(payload).ok()?)
            }
        };
        Some(event)
    }
}

/// The realtime side as the flows see it.
pub trait Emitter: Send + Sync {
    /// Stores an event outside any business transaction, in call order per pod, and has it
    /// delivered. For events a flow's own transaction cannot carry (and for tools and
    /// tests); a flow with a transaction stores its events in it instead.
    fn emit(&self, org_id: Uuid, event: Event);
    /// Events were committed to the event outbox: deliver them now rather than at the next
    /// poll.
    fn wake(&self);
}
