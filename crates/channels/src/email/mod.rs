//! The email channel, through Resend: Standard Webhooks signing and `email.received`
//! parsing inbound, the bodies Resend's webhook leaves out fetched by the inbound job
//! (`received`), and `POST /emails` outbound. A connection's email answers customers;
//! the service's own mail (alerts, invitations, password resets) is
//! [`crate::system_mail`].

mod inbound;
pub(crate) mod outbound;
#[cfg(test)]
pub(crate) mod proptests;
pub mod received;
mod text;

pub use inbound::{Email, verify_signature};
pub use text::html_to_text;

/// The provider behind the channel, by the name its stand-ins answer under (see
/// [`crate::provider`]).
pub const PROVIDER: &str = "resend";
