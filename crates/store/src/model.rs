//! Enumerations shared by the schema and the rest of the code.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The messaging channels Switchboard speaks (`channel_kind` in the schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
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
