//! Building a pod's state from its configuration: the checks, then the Postgres and Redis
//! pools, the realtime layer, the flows' dependencies, the queues and the protection layers.
//! Nothing runs yet; [`super::run`] binds and starts it.

use crate::auth::JwtKeys;
use crate::connection_cache::ConnectionCache;
use crate::lifecycle::Lifecycle;
use crate::protection::Protection;
use crate::protection::backpressure::Backpressure;
use crate::protection::limiter::RateLimiter;
use crate::state::{AppState, AppStateInner};
use std::net::SocketAddr;
use std::sync::Arc;
use switchboard_channels::agent::AgentClient;
use switchboard_channels::system_mail::Mailer;
use switchboard_config::{AppEnv, Config};
use switchboard_coord::{CoordError, Redis};
use switchboard_domain::backoff::Backoff;
use switchboard_domain::faults::Faults;
use switchboard_flows::Deps;
use switchboard_flows::dispatch::Dispatcher;
use switchboard_flows::inbound::EmailBodies;
use switchboard_flows::inbound::{self, InboxPolicy};
use switchboard_flows::intake::Intake;
use switchboard_jobs::alerts::{Alerts, Routes};
use switchboard_jobs::pressure::{AcceptLoad, PacingPolicy};
use switchboard_jobs::queue::{InboundQueue, OutboundQueue};
use switchboard_realtime::{self as realtime, Realtime, RealtimeError, TokenClaims, TokenError};
use switchboard_store::StoreError;
use switchboard_store::crypto::SecretCipher;
use switchboard_store::inbox::RetryPolicy;

/// Why a pod refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Production invariants are broken; one line each.
    #[error("refusing to start:\n{}", .0.join("\n"))]
    Violations(Vec<String>),
    /// Postgres set-up failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Redis set-up failed.
    #[error(transparent)]
    Coord(#[from] CoordError),
    /// Socket.IO or its Redis adapter could not be set up.
    #[error(transparent)]
    Realtime(#[from] RealtimeError),
    /// The listener could not bind.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The inbound job's retries and limits, from the configuration.
fn inbox_policy(config: &Config) -> InboxPolicy {
    InboxPolicy {
        retry: RetryPolicy {
            max_attempts: config.inbox.max_attempts,
            backoff: Backoff::new(config.inbox.retry_base, config.inbox.retry_max).exact(),
        },
        text_max_bytes: config.inbox.text_max_bytes,
        prompt_max_bytes: config.agent.prompt_max_bytes,
    }
}

/// A pod that has been assembled but does not listen or work yet.
pub struct App {
    pub(super) state: AppState,
}

impl App {
    /// Checks the configuration (see [`super::checks`]) and builds the state. Pools connect
    /// lazily, except that the AA9 budget check asks Postgres for `max_connections` (with a
    /// short timeout).
    pub async fn build(config: Config) -> Result<App, StartError> {
        let db = switchboard_store::connect_lazy(&config)?;
        let (violations, proxies) = super::checks::check(&config, &db).await;
        if !violations.is_empty() {
            return Err(StartError::Violations(violations));
        }
        if config.autopilot.mode == switchboard_config::Switch::Off {
            let paused = switchboard_flows::autopilot::pause_everywhere(&db).await?;
            tracing::warn!(orgs = paused, "AUTOPILOT=off: every org's autopilot is off");
        }
        // Validated when the configuration was loaded; a contradiction cannot reach here.
        let endpoint = config
            .redis_endpoint()
            .map_err(|e| StartError::Violations(vec![e.to_string()]))?;
        let cipher = SecretCipher::with_keys(&config.master_keys());
        let (Some(endpoint), Some(cipher)) = (endpoint, cipher) else {
            return Err(StartError::Violations(vec![
                "REDIS_URL (or REDIS_CLUSTER_NODES or REDIS_SENTINELS) and MASTER_ENCRYPTION_KEY (or MASTER_ENCRYPTION_KEYS) must be set".into(),
            ]));
        };
        let redis = Redis::connect(&endpoint, &config.redis.prefix)?;
        let lifecycle = Lifecycle::new();
        let jwt = JwtKeys::new(&config.jwt_secrets(), config.auth.jwt_ttl.as_secs())
            .map(Arc::new)
            .ok_or_else(|| {
                StartError::Violations(vec!["JWT_SECRET or JWT_SECRETS must be set".into()])
            })?;
        let realtime = Realtime::build(
            realtime::Settings::new(&config, endpoint),
            db.clone(),
            token_verifier(jwt.clone()),
            lifecycle.tasks().clone(),
        )
        .await?;
        let queue_poll = config.workers.queue_poll;
        let inbox_lease = config.inbox.lease;
        let mailer = Mailer::from_config(&config)
            .map_err(|e| StartError::Violations(vec![e.to_string()]))?;
        let alerts = Alerts::new(
            db.clone(),
            redis.clone(),
            config.alerts.window,
            &config.pod_id(),
            Routes::from_config(&config, mailer.clone()),
        );
        let pod: Arc<str> = config.pod_id().into();
        let flows = Deps {
            alerts: alerts.clone(),
            db: db.clone(),
            redis: redis.clone(),
            agent: AgentClient::new(&config, redis.clone()),
            emitter: realtime.emitter(),
            inbox_lease,
            inbox_policy: inbox_policy(&config),
            load: AcceptLoad::new(config.workers.accept_priority_in_flight, pacing(&config)),
            email_bodies: EmailBodies::new(config.channels.resend_api_base.clone(), cipher.clone()),
            outbound: OutboundQueue::outbound(&redis).with_poll(queue_poll),
            dispatch: Dispatcher::new(&config, cipher.clone())
                .map_err(|e| StartError::Violations(vec![e.to_string()]))?,
            faults: faults(&config)?,
            inbound: inbound::Batches::start(db.clone(), inbox_lease, pod.clone()),
            pod: pod.clone(),
        };
        let inbound = InboundQueue::inbound(&redis).with_poll(queue_poll);
        let protection = Protection {
            limiter: RateLimiter::new(&config, redis.clone(), alerts.clone()),
            pressure: Backpressure::new(&config),
            proxies,
        };
        let redis_work = switchboard_jobs::redis_check::RedisWork::new(
            redis.clone(),
            vec![inbound.queue_ref(), flows.outbound.queue_ref()],
            (config.workers.concurrency > 0).then(|| workers_identity(&config)),
        );
        let state = AppState::new(AppStateInner {
            connections: ConnectionCache::start(
                redis.clone(),
                lifecycle.shutdown_token(),
                lifecycle.tasks(),
            ),
            intake: Intake::start(
                db.clone(),
                redis.clone(),
                inbound.clone(),
                flows.faults.clone(),
                pod,
            ),
            inbound,
            flows,
            jwt,
            cipher,
            config: Arc::new(config),
            db,
            redis,
            lifecycle,
            realtime,
            protection,
            alerts,
            mailer,
            redis_work,
            ready_cache: Default::default(),
        });
        crate::metrics::install();
        Ok(App { state })
    }

    /// The state, e.g. for tests that drive jobs directly.
    pub fn state(&self) -> &AppState {
        &self.state
    }
}

/// `FAULT_INJECT`, honoured with `APP_ENV=test` only (production refuses to start with it).
fn faults(config: &Config) -> Result<Faults, StartError> {
    match (&config.app.fault_inject, config.app.env) {
        (Some(spec), AppEnv::Test) => {
            Faults::from_spec(spec).map_err(|e| StartError::Violations(vec![e.to_string()]))
        }
        (Some(_), _) => {
            tracing::warn!("FAULT_INJECT is ignored outside APP_ENV=test");
            Ok(Faults::default())
        }
        (None, _) => Ok(Faults::default()),
    }
}

/// The socket handshake's token check: the same keys and rules as the REST API's.
fn token_verifier(jwt: Arc<JwtKeys>) -> realtime::TokenVerifier {
    Arc::new(move |token| {
        jwt.verify(token)
            .map(|claims| TokenClaims {
                user_id: claims.sub,
                expires_at: claims.exp,
                version: claims.ver,
                jti: claims.jti,
            })
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
                _ => TokenError::Invalid,
            })
    })
}

/// The name prefix of this pod's queue workers: unique per pod, process and start, since
/// worker names are identities in Redis.
fn workers_identity(config: &Config) -> String {
    format!(
        "{}-{}-{}",
        config.pod_id(),
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    )
}

/// The pod's pacing: only a pod that processes can pace its webhooks by its processing.
fn pacing(config: &Config) -> PacingPolicy {
    let workers = &config.workers;
    if workers.concurrency == 0 || workers.inbound_concurrency == 0 {
        return PacingPolicy::OFF;
    }
    PacingPolicy {
        backlog_at: workers.pacing_backlog,
        per_processed: workers.accept_per_processed,
        max_wait: workers.pacing_max_wait,
    }
}
