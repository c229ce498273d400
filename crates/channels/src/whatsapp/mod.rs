//! The WhatsApp channel, through Twilio: `X-Twilio-Signature` checking and form parsing
//! inbound, the Messages API outbound.

mod inbound;
pub(crate) mod outbound;
#[cfg(test)]
mod proptests;

pub use inbound::{Twilio, verify_signature};
