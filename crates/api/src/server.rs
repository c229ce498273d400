//! Assembling one pod and running it until a graceful shutdown (AA8).

use crate::auth::JwtKeys;
use crate::connection_cache::ConnectionCache;
use crate::lifecycle::Lifecycle;
use crate::protection::Protection;
use crate::protection::backpressure::Backpressure;
use crate::protection::limiter::RateLimiter;
use crate::state::{AppState, AppStateInner};
use secrecy::ExposeSecret;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use switchboard_config::{AppEnv, Config, Violation};
use switchboard_coord::{CoordError, Redis};
use switchboard_flows::Deps;
use switchboard_flows::agent::AgentClient;
use switchboard_flows::alerts::Alerts;
use switchboard_flows::dispatch::{self, Dispatcher};
use switchboard_flows::email_body::EmailBodies;
use switchboard_flows::faults::Faults;
use switchboard_flows::inbound::InboxPolicy;
use switchboard_flows::intake::Intake;
use switchboard_flows::pressure::AcceptLoad;
use switchboard_flows::queue::{InboundQueue, OutboundQueue};
use switchboard_flows::upkeep;
use switchboard_realtime::{self as realtime, Realtime, RealtimeError, TokenClaims, TokenError};
use switchboard_store::StoreError;
use switchboard_store::crypto::SecretCipher;
use switchboard_store::inbox::RetryPolicy;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

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
            max_attempts: i32::try_from(config.inbox_max_attempts).unwrap_or(i32::MAX),
            base: Duration::from_secs(config.inbox_retry_base_secs),
            max_wait: Duration::from_secs(config.inbox_retry_max_secs),
        },
        text_max_bytes: config.inbound_text_max_bytes,
        prompt_max_bytes: config.agent_prompt_max_bytes,
    }
}

/// A pod that has been assembled but does not listen yet.
pub struct App {
    state: AppState,
}

impl App {
    /// Validates the configuration against the production invariants and builds the state.
    /// Pools connect lazily, except that the AA9 budget check asks Postgres for
    /// `max_connections` (with a short timeout).
    pub async fn build(config: Config) -> Result<App, StartError> {
        let mut violations: Vec<String> = config
            .static_violations()
            .iter()
            .map(Violation::to_string)
            .collect();
        let production = config.app_env == AppEnv::Production;
        if !production {
            if config.redis_url.is_none() {
                violations.push("REDIS_URL must be set".into());
            }
            if config.master_encryption_key.is_none() {
                violations.push("MASTER_ENCRYPTION_KEY must be set".into());
            }
        }
        let db = switchboard_store::connect_lazy(&config)?;
        match tokio::time::timeout(
            Duration::from_secs(5),
            switchboard_store::max_connections(&db),
        )
        .await
        {
            Ok(Ok(max)) => {
                if let Some(v) = config.connection_budget_violation(max) {
                    if production {
                        violations.push(v.to_string());
                    } else {
                        tracing::warn!("{v}");
                    }
                }
            }
            Ok(Err(e)) if production => violations.push(format!(
                "cannot verify the connection budget: Postgres did not answer ({e})"
            )),
            Err(_) if production => violations.push(
                "cannot verify the connection budget: Postgres did not answer within 5 s".into(),
            ),
            _ => tracing::warn!("Postgres unreachable at start-up; /ready will report it"),
        }
        violations.extend(crate::scheduled::schedule_violations(&config));
        let proxies = crate::protection::client_ip::TrustedProxies::parse(&config.trusted_proxies)
            .unwrap_or_else(|e| {
                violations.push(e);
                Default::default()
            });
        if !violations.is_empty() {
            return Err(StartError::Violations(violations));
        }
        let (Some(redis_url), Some(key)) = (&config.redis_url, config.master_key_bytes()) else {
            return Err(StartError::Violations(vec![
                "REDIS_URL and MASTER_ENCRYPTION_KEY must be set".into(),
            ]));
        };
        let redis = Redis::connect_lazy(redis_url.expose_secret(), &config.redis_prefix)?;
        let lifecycle = Lifecycle::new();
        let jwt = Arc::new(JwtKeys::new(&config.jwt_secret, config.jwt_ttl_secs));
        let realtime = Realtime::build(
            realtime::Settings::new(&config, redis_url.expose_secret()),
            db.clone(),
            token_verifier(jwt.clone()),
            lifecycle.tasks().clone(),
        )
        .await?;
        let flows = Deps {
            db: db.clone(),
            redis: redis.clone(),
            agent: AgentClient::new(&config, redis.clone()),
            emitter: realtime.emitter(),
            inbox_lease: Duration::from_secs(config.inbox_lease_secs.max(1)),
            inbox_policy: inbox_policy(&config),
            load: AcceptLoad::new(config.accept_priority_in_flight),
            email_bodies: EmailBodies::new(config.resend_api_base.clone(), SecretCipher::new(&key)),
            outbound: OutboundQueue::outbound(&redis),
            dispatch: Dispatcher::new(&config, SecretCipher::new(&key))
                .map_err(|e| StartError::Violations(vec![e.to_string()]))?,
            faults: faults(&config)?,
        };
        let inbound = InboundQueue::inbound(&redis);
        let alerts = Alerts::new(
            db.clone(),
            redis.clone(),
            Duration::from_secs(config.alert_window_secs),
            &config.pod_id(),
        );
        let protection = Protection {
            limiter: RateLimiter::new(&config, redis.clone(), alerts.clone()),
            pressure: Backpressure::new(&config),
            proxies,
        };
        let state = AppState::new(AppStateInner {
            connections: ConnectionCache::start(redis.clone(), lifecycle.shutdown_token()),
            intake: Intake::start(db.clone(), redis.clone(), inbound.clone()),
            inbound,
            flows,
            jwt,
            cipher: SecretCipher::new(&key),
            config: Arc::new(config),
            db,
            redis,
            lifecycle,
            realtime,
            protection,
            alerts,
        });
        crate::metrics::install();
        Ok(App { state })
    }

    /// The state, e.g. for tests that drive jobs directly.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Binds `BIND_ADDR:PORT` and starts serving.
    pub async fn start(self) -> Result<Server, StartError> {
        let addr = SocketAddr::new(self.state.config.bind_addr, self.state.config.port);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?;
        // `/metrics` on an address of its own (kept off the public port), when configured.
        let metrics = match self.state.config.metrics_addr {
            Some(addr) => {
                let listener = TcpListener::bind(addr)
                    .await
                    .map_err(|source| StartError::Bind { addr, source })?;
                let bound = listener
                    .local_addr()
                    .map_err(|source| StartError::Bind { addr, source })?;
                Some((listener, bound))
            }
            None => None,
        };
        Ok(self.serve(listener, local, metrics))
    }

    fn serve(
        self,
        listener: TcpListener,
        addr: SocketAddr,
        metrics: Option<(TcpListener, SocketAddr)>,
    ) -> Server {
        let state = self.state;
        let lifecycle = state.lifecycle.clone();
        let router = crate::http::router(state.clone());
        let header_timeout = Duration::from_millis(state.config.http_header_timeout_ms);

        // Drain: readiness is already 503; wait so the load balancer notices, then stop.
        let drain_delay = state.config.drain_delay();
        let drain = lifecycle.clone();
        tokio::spawn(async move {
            drain.drain_requested().await;
            tracing::info!(delay_ms = drain_delay.as_millis() as u64, "draining");
            tokio::time::sleep(drain_delay).await;
            drain.stop();
        });

        spawn_background(&state);
        let token = lifecycle.shutdown_token();
        let metrics_addr = metrics.map(|(listener, bound)| {
            let router =
                axum::Router::new().route("/metrics", axum::routing::get(crate::metrics::render));
            let token = token.clone();
            lifecycle.tasks().spawn(async move {
                if let Err(e) = crate::serve::serve(listener, router, header_timeout, token).await {
                    tracing::error!(error = %e, "metrics listener failed");
                }
            });
            tracing::info!(addr = %bound, "metrics listening");
            bound
        });
        let http = tokio::spawn(crate::serve::serve(listener, router, header_timeout, token));
        tracing::info!(%addr, "listening");
        Server {
            addr,
            metrics_addr,
            state,
            http,
        }
    }
}

/// `FAULT_INJECT`, honoured with `APP_ENV=test` only (production refuses to start with it).
fn faults(config: &Config) -> Result<Faults, StartError> {
    match (&config.fault_inject, config.app_env) {
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
            })
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
                _ => TokenError::Invalid,
            })
    })
}

/// Starts the pod's workers and sweepers on the lifecycle's tracker and token, so shutdown
/// waits for the jobs they hold.
fn spawn_background(state: &AppState) {
    let config = &state.config;
    let identity = format!(
        "{}-{}-{}",
        config.pod_id(),
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let token = state.lifecycle.shutdown_token();
    let tracker = state.lifecycle.tasks();
    state.realtime.spawn_background(token.clone(), tracker);
    // The promoter stays a per-pod 100 ms timer, not a scheduled job: see
    // `switchboard_flows::jobs::housekeeping`.
    upkeep::spawn_promoter(state.inbound.queue_ref(), token.clone(), tracker);
    upkeep::spawn_promoter(state.flows.outbound.queue_ref(), token.clone(), tracker);
    // WORKER_CONCURRENCY=0 makes an HTTP-and-sockets-only pod; the other pods run the jobs.
    if config.worker_concurrency > 0 {
        state.inbound.spawn_workers(
            state.flows.clone(),
            identity.clone(),
            config.worker_concurrency,
            token.clone(),
            tracker,
        );
        dispatch::spawn_workers(
            state.flows.clone(),
            identity.clone(),
            config.worker_concurrency,
            token.clone(),
            tracker,
        );
    }
    dispatch::spawn_gauges(state.flows.clone(), token.clone(), tracker);
    // Every periodic job, once per slot across pods (AA2).
    crate::scheduled::build(state, &identity).spawn(token, tracker);
    crate::sampler::spawn(state.clone());
}

/// A running pod.
pub struct Server {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    state: AppState,
    http: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where `/metrics` is served when `METRICS_ADDR` is set (useful with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The pod's state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Starts a graceful shutdown, as SIGTERM does.
    pub fn begin_shutdown(&self) {
        self.state.lifecycle.begin_drain();
    }

    /// Waits for SIGTERM or SIGINT, then shuts down gracefully.
    pub async fn run_until_signal(self) -> Result<(), std::io::Error> {
        let lifecycle = self.state.lifecycle.clone();
        tokio::select! {
            () = shutdown_signal() => {
                tracing::info!("shutdown signal received");
                lifecycle.begin_drain();
            }
            () = lifecycle.drain_requested() => {}
        }
        self.wait().await
    }

    /// Waits until the pod has stopped: the listener is closed, in-flight requests and
    /// tracked tasks finished (or the budget ran out), pools closed.
    pub async fn wait(self) -> Result<(), std::io::Error> {
        let lifecycle = self.state.lifecycle.clone();
        lifecycle.drain_requested().await;
        let budget = self.state.config.drain_delay() + self.state.config.shutdown_budget();
        let tasks = lifecycle.tasks().clone();
        tasks.close();
        let finished = tokio::time::timeout(budget, async {
            let served = self.http.await;
            tasks.wait().await;
            served
        })
        .await;
        let result = match finished {
            Ok(Ok(served)) => served,
            Ok(Err(join)) => Err(std::io::Error::other(join)),
            Err(_) => {
                tracing::warn!(budget_s = budget.as_secs(), "shutdown budget exhausted");
                Ok(())
            }
        };
        self.state.db.close().await;
        tracing::info!("stopped");
        result
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
