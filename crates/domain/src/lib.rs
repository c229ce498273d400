//! The names every layer shares, at the bottom of the crate graph: the channel kinds and
//! roles of the schema, the realtime events and their payloads, the payloads that cross a
//! queue, the schedule slot helper, the lease-renewal loop, the one retry backoff, the
//! one loop for periodic background work and the trace context that crosses the queue. A crate that needs one of these names depends on
//! this one instead of on the layer that happened to define it first.

pub mod alerts;
pub mod autopilot;
pub mod backoff;
pub mod events;
pub mod faults;
pub mod jobs;
mod kinds;
pub mod lease;
pub mod periodic;
pub mod queue_state;
pub mod slot;
pub mod trace;

pub use events::{Emitter, Event, EventKind};
pub use kinds::{
    Author, ChannelKind, DeadLetterStatus, DeliveryStatus, InboundStatus, JobName, JourneyStep,
    QueueStatus, ReportKind, Role,
};
