//! The Telegram channel: the Bot API's webhook secret token and `Update` parsing inbound,
//! `sendMessage` outbound.

mod inbound;
pub(crate) mod outbound;
#[cfg(test)]
pub(crate) mod proptests;

pub use inbound::{MIN_SECRET_TOKEN_LEN, Telegram};

/// The provider behind the channel, by the name its stand-ins answer under (see
/// [`crate::provider`]).
pub const PROVIDER: &str = "telegram";
