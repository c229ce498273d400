//! Payloads that cross a queue or the inbox: one serde type each, written by one side and
//! read by the other, so renaming a field is a compile error rather than a job failing at
//! run time.

use crate::trace::TraceParent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// The `channel-inbound` job: the inbox id, and the webhook's trace for the job to
/// continue; everything else is read from Postgres.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboundJob {
    /// `inbound_events.id`.
    pub event_id: Uuid,
    /// The webhook span's context (`inbound_events.traceparent`), when tracing is on. Left
    /// out of the JSON when none, so pods of the previous release read the payload as before.
    #[serde(
        default,
        deserialize_with = "crate::trace::lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub traceparent: Option<TraceParent>,
}

/// The `channel-outbound` job: the outbox id, and the release's trace for the dispatch to
/// continue; the row is the truth.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutboundJob {
    /// `outbox.id`.
    pub outbox_id: Uuid,
    /// The release span's context (`outbox.traceparent`), when tracing is on.
    #[serde(
        default,
        deserialize_with = "crate::trace::lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub traceparent: Option<TraceParent>,
}

/// What the webhook path stores in `inbound_events.payload` and the inbound job reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboxPayload {
    /// The customer message the event carries, if any (bot messages, edits and provider
    /// status callbacks carry none).
    pub message: Option<InboxMessage>,
    /// The provider's payload as received, for inspection and replay.
    pub raw: Value,
}

/// A customer message as extracted by the channel parser.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboxMessage {
    /// The customer's identity on the channel.
    pub customer_external_id: String,
    /// A display name when the provider sends one.
    pub customer_name: Option<String>,
    /// The text; empty for a Resend email, whose body the job fetches.
    pub text: String,
    /// Unique per message within the connection.
    pub channel_message_id: String,
    /// What an outbound reply needs to address the customer (channel specific).
    #[serde(default)]
    pub reply_to: Value,
}

/// What the release transaction stores in `outbox.payload` for the dispatch job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutboxPayload {
    /// The reply text.
    pub text: String,
    /// The customer's identity on the channel.
    pub customer_external_id: String,
    /// The reply target of the customer's latest message (thread, chat, email headers).
    #[serde(default)]
    pub reply_to: Value,
}
