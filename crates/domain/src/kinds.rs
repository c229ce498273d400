//! Enumerations shared by the schema and the rest of the code.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The messaging channels Switchboard speaks (`channel_kind` in the schema).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[sqlx(type_name = "channel_kind", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// Slack Events API.
    Slack,
    /// WhatsApp through Twilio.
    Whatsapp,
    /// Telegram Bot API.
    Telegram,
    /// Email through Resend.
    Email,
}

impl ChannelKind {
    /// Every channel, in a stable order.
    pub const ALL: [ChannelKind; 4] = [
        ChannelKind::Slack,
        ChannelKind::Whatsapp,
        ChannelKind::Telegram,
        ChannelKind::Email,
    ];

    /// The lowercase name used in URLs, keys and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Slack => "slack",
            ChannelKind::Whatsapp => "whatsapp",
            ChannelKind::Telegram => "telegram",
            ChannelKind::Email => "email",
        }
    }
}

impl fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ChannelKind {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChannelKind::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or(())
    }
}

/// A member's role in an org (`member_role`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[sqlx(type_name = "member_role", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Manages the org: connections, members.
    Admin,
    /// Reviews and releases replies.
    Expert,
}

impl FromStr for Role {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "admin" => Ok(Role::Admin),
            "expert" => Ok(Role::Expert),
            _ => Err(()),
        }
    }
}

/// An expert-queue item's state (`queue_status`). The transitions between them are listed
/// in docs/ARCHITECTURE.md ("The queue item's state machine").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[sqlx(type_name = "queue_status", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum QueueStatus {
    /// Waiting for an expert.
    Pending,
    /// An expert holds it (`claimed_by`).
    Claimed,
    /// A reply went out; waiting for the customer.
    AwaitingClient,
    /// Put aside until `snoozed_until`.
    Snoozed,
    /// Done; a new customer message opens a new item.
    Resolved,
}

impl QueueStatus {
    /// Every state, in a stable order.
    pub const ALL: [QueueStatus; 5] = [
        QueueStatus::Pending,
        QueueStatus::Claimed,
        QueueStatus::AwaitingClient,
        QueueStatus::Snoozed,
        QueueStatus::Resolved,
    ];

    /// The schema's and the API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueStatus::Pending => "pending",
            QueueStatus::Claimed => "claimed",
            QueueStatus::AwaitingClient => "awaiting_client",
            QueueStatus::Snoozed => "snoozed",
            QueueStatus::Resolved => "resolved",
        }
    }
}

impl FromStr for QueueStatus {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        QueueStatus::ALL
            .into_iter()
            .find(|q| q.as_str() == s)
            .ok_or(())
    }
}

impl Role {
    /// The schema's and the API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Expert => "expert",
        }
    }
}
