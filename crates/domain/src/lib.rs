//! The names every layer shares, at the bottom of the crate graph: the channel kinds and
//! roles of the schema, the realtime events and their payloads, the payloads that cross a
//! queue, and the schedule slot helper and the lease-renewal loop. A crate that needs one of these names depends on
//! this one instead of on the layer that happened to define it first.

pub mod events;
pub mod jobs;
mod kinds;
pub mod lease;
pub mod slot;

pub use events::{Emitter, EventKind};
pub use kinds::{ChannelKind, QueueStatus, Role};
