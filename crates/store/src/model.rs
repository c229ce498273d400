//! The schema's enumerations, defined at the bottom of the crate graph.

pub use switchboard_domain::{ChannelKind, QueueStatus, Role};
