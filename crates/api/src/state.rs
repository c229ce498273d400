//! The shared application state handed to every handler.

use crate::auth::JwtKeys;
use crate::connection_cache::ConnectionCache;
use crate::lifecycle::Lifecycle;
use std::sync::Arc;
use switchboard_config::Config;
use switchboard_coord::Redis;
use switchboard_flows::Deps;
use switchboard_flows::intake::Intake;
use switchboard_jobs::queue::InboundQueue;
use switchboard_realtime::Realtime;
use switchboard_store::PgPool;
use switchboard_store::crypto::SecretCipher;

/// Cheap to clone (one reference count): every handler's `State` extractor clones it.
/// Fields are reached through `Deref` to [`AppStateInner`].
#[derive(Clone)]
pub struct AppState(Arc<AppStateInner>);

impl AppState {
    /// Wraps the pod's handles.
    pub fn new(inner: AppStateInner) -> Self {
        Self(Arc::new(inner))
    }

    /// What runs customer erasures: the request handler and the `customer-erasure` job.
    pub fn erasure(&self) -> switchboard_flows::periodic::customer_erasure::CustomerErasure {
        switchboard_flows::periodic::customer_erasure::CustomerErasure {
            db: self.db.clone(),
            redis: self.redis.clone(),
            emitter: self.flows.emitter.clone(),
            lease: self.config.privacy.erasure_lease,
            faults: self.flows.faults.clone(),
        }
    }
}

impl AppState {
    /// What the team's flows (members, invitations, passwords, sessions) need of the pod.
    pub fn team(&self) -> switchboard_flows::team::Team<'_> {
        switchboard_flows::team::Team {
            deps: &self.flows,
            mailer: &self.mailer,
            console_url: self.config.http.public_base_url.as_str(),
            sessions: self,
            tasks: self.lifecycle.tasks(),
        }
    }
}

/// A user's revoked sessions end on every pod through the realtime layer.
#[async_trait::async_trait]
impl switchboard_flows::team::Sessions for AppState {
    async fn disconnect_user(&self, user_id: uuid::Uuid) {
        self.realtime.disconnect_user(user_id).await;
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateInner;
    fn deref(&self) -> &AppStateInner {
        &self.0
    }
}

/// The pools, handles and configuration of one pod.
pub struct AppStateInner {
    /// Validated configuration.
    pub config: Arc<Config>,
    /// Postgres pool.
    pub db: PgPool,
    /// Redis coordination handle.
    pub redis: Redis,
    /// Channel secret encryption.
    pub cipher: SecretCipher,
    /// Login token keys.
    pub jwt: Arc<JwtKeys>,
    /// Draining flag, shutdown token, task tracker.
    pub lifecycle: Lifecycle,
    /// Producer for the `channel-inbound` queue.
    pub inbound: InboundQueue,
    /// Channel connections for the webhook path, invalidated across pods.
    pub connections: ConnectionCache,
    /// The batching inbox writer of the webhook path.
    pub intake: Intake,
    /// What the flows and their workers need.
    pub flows: Deps,
    /// Socket.IO, its Redis adapter and the emitter the flows use.
    pub realtime: Realtime,
    /// Rate limits, backpressure and proxy trust.
    pub protection: crate::protection::Protection,
    /// Alerts, raised once per window across pods.
    pub alerts: switchboard_jobs::alerts::Alerts,
    /// The system mailer (invitations, password resets); may be unconfigured.
    pub mailer: switchboard_channels::system_mail::Mailer,
    /// Whether the pod can do its Redis work (scripts, pipelines, worker registration).
    pub redis_work: switchboard_jobs::redis_check::RedisWork,
    /// `/ready`'s last answer, served again for a second.
    pub ready_cache: crate::http::health::ReadyCache,
}
