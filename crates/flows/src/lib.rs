//! Switchboard's product flows; the machinery that runs them (queues, scheduler, alerts) is
//! `switchboard_jobs`, the third parties they call are `switchboard_channels`.
//!
//! F2 (`channel-inbound`): an accepted webhook event becomes a customer, a conversation, a
//! message, an agent draft and an expert-queue item, with every write idempotent so the job
//! can run any number of times (at-least-once delivery, exactly-once effects).
//!
//! The expert's actions (`expert`): claim, release (F3) and the rest, each one atomic
//! transition with its outbound message, outbox row, audit row, realtime events and
//! Idempotency-Key answer (`idempotency`) in one transaction.
//!
//! Every other change a member or an admin makes is a function of its concern's module
//! (`team`, `saved_replies`, `notes`, `connections`, `orgs`, `dead_letters`, `inbox`,
//! `autopilot`) that opens the transaction, writes the change, its audit row and its events,
//! commits, and returns a typed refusal; the API's handlers only parse, authorize and answer.
//! (An inbox replay's reset and its audit row are two statements: the reset is harmless on
//! its own, the event being due again either way.)

pub mod autopilot;
pub mod connections;
pub mod dead_letters;
pub mod dispatch;
pub mod expert;
pub mod idempotency;
pub mod inbound;
pub mod inbox;
pub mod intake;
pub mod journey;
pub mod notes;
pub mod orgs;
pub mod periodic;
pub mod saved_replies;
pub mod team;

use std::sync::Arc;
use switchboard_coord::Redis;
use switchboard_store::{PgPool, StoreError};

/// What the flows need from the pod.
#[derive(Clone)]
pub struct Deps {
    /// Postgres.
    pub db: PgPool,
    /// Where alerts (a dead reply) go.
    pub alerts: switchboard_jobs::alerts::Alerts,
    /// Redis coordination.
    pub redis: Redis,
    /// The drafting agent.
    pub agent: switchboard_channels::agent::AgentClient,
    /// Realtime delivery.
    pub emitter: Arc<dyn switchboard_domain::Emitter>,
    /// How long one job may hold an inbox event.
    pub inbox_lease: std::time::Duration,
    /// Retries, parking and text limits of the `channel-inbound` job.
    pub inbox_policy: inbound::InboxPolicy,
    /// The pod's webhook load, which jobs give way to.
    pub load: switchboard_jobs::pressure::AcceptLoad,
    /// Resend email bodies, which its webhooks leave out.
    pub email_bodies: inbound::EmailBodies,
    /// Producer for `channel-outbound`.
    pub outbound: switchboard_jobs::queue::OutboundQueue,
    /// Provider clients and settings of the `channel-outbound` job.
    pub dispatch: dispatch::Dispatcher,
    /// The inbound job's statements, batched across the pod's jobs.
    pub inbound: inbound::Batches,
    /// Test-only fault injection (never armed in production).
    pub faults: switchboard_domain::faults::Faults,
    /// This pod's id (`POD_ID`), which every journey step it writes names.
    pub pod: Arc<str>,
}

/// A flow's own transaction, committed with [`commit`].
pub type Tx = sqlx::Transaction<'static, sqlx::Postgres>;

impl Deps {
    /// Opens a flow's transaction; its failure is the store's, like every statement's in it.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        Ok(self.db.begin().await?)
    }

    /// What the dead-letter job and an admin's retry need to hand a row back.
    pub fn dead_letters(&self) -> crate::periodic::dead_letters::DeadLetters {
        crate::periodic::dead_letters::DeadLetters {
            db: self.db.clone(),
            outbound: self.outbound.clone(),
            emitter: self.emitter.clone(),
            alerts: self.alerts.clone(),
        }
    }
}

/// Commits a flow's transaction; its failure is the store's.
pub async fn commit(tx: Tx) -> Result<(), StoreError> {
    Ok(tx.commit().await?)
}
