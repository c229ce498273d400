//! F2 agent draft, the `channel-inbound` job: the agent's draft (retried, or a flagged
//! fallback), the batched statements, the history kept, an email's body fetched; and the
//! autopilot's policy, which judges the drafts.

mod autopilot;
mod inbound_agent;
mod inbound_batches;
mod inbound_email;
mod inbound_history;
