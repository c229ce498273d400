//! The seam between the flows and realtime delivery. Flows call [`Emitter::emit`] after their
//! transaction commits; the realtime layer decides how events reach sockets.

use serde_json::Value;
use uuid::Uuid;

/// Receives domain events for an org after they are committed.
pub trait Emitter: Send + Sync {
    /// `event` is one of the SPEC §9 names (`queue_item_created`, `queue_item_updated`,
    /// `message_created`, `agent_message_sent`).
    fn emit(&self, org_id: Uuid, event: &'static str, payload: Value);
}

/// An emitter that delivers nothing, for a pod without realtime delivery configured. It
/// logs at debug level so the events are visible when tracing them.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRealtime;

impl Emitter for NoRealtime {
    fn emit(&self, org_id: Uuid, event: &'static str, payload: Value) {
        tracing::debug!(%org_id, event, %payload, "realtime delivery not configured");
    }
}
