//! The Slack channel: the Events API inbound (`v0` request signing, `event_callback`
//! parsing) and `chat.postMessage` outbound.

mod inbound;
pub(crate) mod outbound;
#[cfg(test)]
pub(crate) mod proptests;

pub use inbound::{Slack, verify_signature};

/// The provider behind the channel, by the name its stand-ins answer under (see
/// [`crate::provider`]).
pub const PROVIDER: &str = "slack";
