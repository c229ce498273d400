//! Switchboard's domain flows and the durable jobs that run them.
//!
//! F2 (`channel-inbound`): an accepted webhook event becomes a customer, a conversation, a
//! message, an agent draft and an expert-queue item, with every write idempotent so the job
//! can run any number of times (at-least-once delivery, exactly-once effects).
//!
//! The expert's actions (`expert`): claim, release (F3) and the rest, each one atomic
//! transition with its outbound message, outbox row, audit row and realtime events in one
//! transaction.

pub mod agent;
pub mod alerts;
pub mod coalesce;
pub mod dispatch;
pub mod email_body;
pub mod expert;
pub mod faults;
pub mod inbound;
pub mod inbox_retention;
pub mod intake;
pub mod jobs;
pub mod outbox_sweeper;
pub mod pressure;
pub mod queue;
pub mod redis_check;
pub mod scheduler;
pub mod sweeper;
pub mod upkeep;

use std::sync::Arc;
use switchboard_coord::Redis;
use switchboard_store::PgPool;

/// What the flows need from the pod.
#[derive(Clone)]
pub struct Deps {
    /// Postgres.
    pub db: PgPool,
    /// Redis coordination.
    pub redis: Redis,
    /// The drafting agent.
    pub agent: agent::AgentClient,
    /// Realtime delivery.
    pub emitter: Arc<dyn switchboard_domain::Emitter>,
    /// How long one job may hold an inbox event.
    pub inbox_lease: std::time::Duration,
    /// Retries, parking and text limits of the `channel-inbound` job.
    pub inbox_policy: inbound::InboxPolicy,
    /// The pod's webhook load, which jobs give way to.
    pub load: pressure::AcceptLoad,
    /// Resend email bodies, which its webhooks leave out.
    pub email_bodies: email_body::EmailBodies,
    /// Producer for `channel-outbound`.
    pub outbound: queue::OutboundQueue,
    /// Provider clients and settings of the `channel-outbound` job.
    pub dispatch: dispatch::Dispatcher,
    /// The inbound job's statements, batched across the pod's jobs.
    pub inbound: inbound::Batches,
    /// Test-only fault injection (never armed in production).
    pub faults: faults::Faults,
}
