//! Outbound dispatch: the `channel-outbound` job that delivers a released reply (an `outbox`
//! row) to the customer through the connection they last wrote to, once, and the
//! dead-letter worker that retries what failed for good.
//!
//! Failures it guards against, and how:
//! - two workers (or pods) running the same row: the job claims the row with one atomic
//!   `UPDATE … RETURNING` and a lease renewed while the provider is called; every later
//!   write names the claim, and a run that finds its lease taken over stops before its next
//!   part (see [`lease`]);
//! - Postgres failing a write after a provider accepted a part: the write is tried again
//!   while the lease lasts, since a part not recorded is sent again by the next holder;
//! - a pod dying mid-send: its lease lapses and the outbox sweeper pushes the row again;
//!   each accepted part's provider id is recorded before the next part goes out, so a
//!   retry never resends an accepted part (see docs/ARCHITECTURE.md for the one window
//!   that remains: accepted by the provider, not yet recorded);
//! - a slow, failing or rate-limiting provider: up to [`MAX_ATTEMPTS`] attempts per round
//!   with exponential backoff and jitter, honouring the provider's own wait; a long wait
//!   reschedules the job rather than holding a worker;
//! - a provider that is down: a breaker per (channel, connection) in Redis, shared by every
//!   pod, defers sends while it is open and lets one probe through after the cool-down;
//! - a failure no retry fixes soon: the round ends in the dead-letter table, which the
//!   dead-letter worker retries with backoff up to [`MAX_DEAD_LETTER_RETRIES`] times before
//!   the reply is `dead` and one alert is raised;
//! - a row that cannot be sent at all (its connection deleted, its secrets no longer
//!   decrypting with the master key): `dead` at once with one alert, before any provider
//!   call, rather than an error that the sweeper would push again for ever.
//!
//! Each outcome is one transaction on the outbox row, its message and (on failure) its
//! dead-letter row, with the `message_status_updated` event stored in it.

pub(crate) mod breakers;
mod lease;
mod record;
mod send;
mod worker;

pub use breakers::{FAMILY as BREAKER_FAMILY, breaker, spawn_gauges};
pub use send::process;
pub use worker::{push_after, spawn_workers};

use std::time::Duration;
use switchboard_channels::outbound::{BuildError, ProviderBases, Providers};
use switchboard_config::Config;
use switchboard_coord::breaker::BreakerConfig;
use switchboard_domain::backoff::Backoff;
use switchboard_store::StoreError;
use switchboard_store::crypto::SecretCipher;

/// Provider attempts per delivery round; the third failure ends the round in the dead-letter
/// table.
pub const MAX_ATTEMPTS: i32 = 3;

/// Dead-letter retries before a reply is `dead` (SPEC §3).
pub const MAX_DEAD_LETTER_RETRIES: i32 = 5;

/// How the job behaves; from the configuration, or a test's own.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How long a job holds its outbox row (`OUTBOX_LEASE_SECS`).
    pub lease: Duration,
    /// Waits between provider attempts: from `OUTBOUND_RETRY_BASE_MS`, doubled per attempt,
    /// with jitter.
    pub retry: Backoff,
    /// Longest wait a worker sleeps through (`OUTBOUND_MAX_INLINE_WAIT_MS`).
    pub max_inline_wait: Duration,
    /// The per-connection breaker.
    pub breaker: BreakerConfig,
    /// Waits between dead-letter retries: from `DEAD_LETTER_BACKOFF_MS`, doubled per retry.
    pub dead_letter_backoff: Backoff,
}

impl Settings {
    /// The settings `config` describes.
    pub fn from_config(config: &Config) -> Self {
        let outbound = &config.outbound;
        Self {
            lease: config.outbox.lease,
            retry: Backoff::new(outbound.retry_base, Duration::MAX),
            max_inline_wait: outbound.max_inline_wait,
            breaker: BreakerConfig {
                threshold: outbound.breaker_threshold,
                window: Duration::from_secs(60),
                cooldown: outbound.breaker_cooldown,
                // A probe is one provider call: it cannot take longer than the timeout.
                probe_ttl: outbound.timeout + Duration::from_secs(2),
            },
            dead_letter_backoff: Backoff::new(outbound.dead_letter_backoff, Duration::MAX).exact(),
        }
    }
}

/// What the job needs besides the pod's pools: the provider clients, the key to the
/// connections' secrets and the settings.
#[derive(Clone)]
pub struct Dispatcher {
    providers: Providers,
    cipher: SecretCipher,
    settings: Settings,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// Provider clients against the configured API bases (`*_API_BASE`), each call bounded by
    /// `OUTBOUND_TIMEOUT_MS`.
    pub fn new(config: &Config, cipher: SecretCipher) -> Result<Self, BuildError> {
        let bases = ProviderBases {
            slack: config.channels.slack_api_base.clone(),
            whatsapp: config.channels.whatsapp_api_base.clone(),
            telegram: config.channels.telegram_api_base.clone(),
            resend: config.channels.resend_api_base.clone(),
        };
        Ok(Self {
            providers: Providers::new(bases, config.outbound.timeout)?,
            cipher,
            settings: Settings::from_config(config),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// What one run of the job did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// The row no longer exists.
    Missing,
    /// Nothing left to do: sent, or waiting for the dead-letter worker.
    Finished,
    /// Another worker holds the row right now.
    HeldElsewhere,
    /// Not due for a while; the job that rescheduled it (or the sweeper) runs it then.
    NotDue,
    /// Every part was accepted.
    Sent {
        /// How many parts the reply took.
        parts: usize,
    },
    /// An attempt failed; the row is due again after this long.
    Rescheduled {
        /// The wait.
        after: Duration,
    },
    /// The connection's breaker is open: no call was made, the row waits this long.
    Deferred {
        /// The wait.
        after: Duration,
    },
    /// The round failed for good: dead-lettered, or `dead` when the retries are used up.
    Failed {
        /// Whether the reply is now `dead`.
        dead: bool,
    },
    /// The lease was taken over by another worker (or ran out while Postgres could not
    /// renew it): the run stopped before its next part and recorded nothing more; the row's
    /// next holder sends what is not recorded.
    LeaseLost,
}

impl Outcome {
    /// The span attribute `outcome` of the job's run.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Missing => "missing",
            Outcome::Finished => "finished",
            Outcome::HeldElsewhere => "held_elsewhere",
            Outcome::NotDue => "not_due",
            Outcome::Sent { .. } => "sent",
            Outcome::Rescheduled { .. } => "rescheduled",
            Outcome::Deferred { .. } => "deferred",
            Outcome::Failed { dead: false } => "dead_lettered",
            Outcome::Failed { dead: true } => "dead",
            Outcome::LeaseLost => "lease_lost",
        }
    }
}

/// Errors of the job; the row stays unsent and is tried again (the outbox sweeper pushes it
/// once its lease has lapsed).
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// Postgres failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for DispatchError {
    fn from(e: sqlx::Error) -> Self {
        DispatchError::Store(StoreError::from(e))
    }
}
