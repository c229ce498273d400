//! Switchboard configuration (AA10: one source of config and secrets).
//!
//! Layers, later wins: the embedded `config/default.toml` → `config/{APP_ENV}.toml` (looked
//! up in `CONFIG_DIR`, default `config`) → environment variables named like the keys in upper
//! case. A secret may also be given by reference as `{NAME}_FILE` (a path whose contents are
//! the secret), which is how container orchestrators mount them. Secrets are
//! [`secrecy::SecretString`]s: `Debug` and logs never show them.

mod invariants;
mod load;
mod rate;
mod redact;
mod tls;

pub use invariants::Violation;
pub use load::{ConfigError, load, load_from};
pub use rate::{RateSpec, parse_rate};
pub use redact::redact_url;
pub use tls::{PgTls, PoolerMode, RedisEndpoint, RedisTls, TlsMode};

use secrecy::SecretString;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;
use url::Url;

/// Which deployment the process runs as; production turns on the start-up invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppEnv {
    /// A developer's machine.
    Development,
    /// Automated tests.
    Test,
    /// A real deployment: invariants are enforced before the port is bound.
    Production,
}

impl AppEnv {
    /// The name used for `config/{name}.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            AppEnv::Development => "development",
            AppEnv::Test => "test",
            AppEnv::Production => "production",
        }
    }
}

/// How the agent client talks to `AGENT_URL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentMode {
    /// Switchboard's own small contract: `POST {AGENT_URL}/v1/chat`.
    Switchboard,
    /// Any OpenAI-compatible `POST {AGENT_URL}/v1/chat/completions` endpoint.
    Openai,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line (production).
    Json,
}

/// The validated configuration of one pod.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    /// `APP_ENV`.
    pub app_env: AppEnv,
    /// Address the HTTP listener binds (`BIND_ADDR`).
    pub bind_addr: IpAddr,
    /// `PORT` (0 picks a free port, used by tests).
    pub port: u16,
    /// `DATABASE_URL`: what the pods' pool connects to (a pooler such as RDS Proxy or
    /// PgBouncer, or Postgres itself).
    pub database_url: SecretString,
    /// `DATABASE_DIRECT_URL`: Postgres itself, for work that needs a whole session
    /// (`switchboard migrate` takes a session lock). Default: `DATABASE_URL`.
    #[serde(default)]
    pub database_direct_url: Option<SecretString>,
    /// `DATABASE_TLS`; unset: the URL's `sslmode`, or `verify` in production.
    #[serde(default)]
    pub database_tls: Option<TlsMode>,
    /// `DATABASE_TLS_CA`: a PEM bundle (RDS's, say) trusted besides the system roots.
    #[serde(default)]
    pub database_tls_ca: Option<std::path::PathBuf>,
    /// `DATABASE_POOLER`: `transaction` when a transaction-mode pooler is in front.
    #[serde(default)]
    pub database_pooler: PoolerMode,
    /// `DB_MAX_CONNECTIONS`: the connections this service may hold on the server side (a
    /// pooler's budget for it); used instead of `SHOW max_connections` for AA9 when set.
    #[serde(default)]
    pub db_max_connections: Option<u32>,
    /// `REDIS_URL`; required in production (no silent in-memory fallback).
    #[serde(default)]
    pub redis_url: Option<SecretString>,
    /// `REDIS_CLUSTER_NODES`: comma-separated seed URLs of a Redis Cluster. When set, every
    /// Redis user runs on the cluster and `REDIS_URL` is not needed.
    #[serde(default)]
    pub redis_cluster_nodes: Option<SecretString>,
    /// `REDIS_TLS`; unset: follows the URL's scheme (`rediss://` verifies).
    #[serde(default)]
    pub redis_tls: Option<TlsMode>,
    /// `REDIS_TLS_CA`: a PEM bundle trusted besides the system roots.
    #[serde(default)]
    pub redis_tls_ca: Option<std::path::PathBuf>,
    /// Every Redis key this pod writes starts with `{redis_prefix}:` (`REDIS_PREFIX`).
    pub redis_prefix: String,
    /// HS256 signing secret for login tokens (`JWT_SECRET`).
    pub jwt_secret: SecretString,
    /// Lifetime of a login token in seconds (`JWT_TTL_SECS`).
    pub jwt_ttl_secs: u64,
    /// Base64 (or hex) of the 32-byte AES-256-GCM key for channel secrets.
    #[serde(default)]
    pub master_encryption_key: Option<SecretString>,
    /// `SENTRY_DSN`; required in production.
    #[serde(default)]
    pub sentry_dsn: Option<SecretString>,
    /// The URL providers call; webhook URLs and Twilio signatures are built from it.
    pub public_base_url: Url,
    /// Where the drafting agent listens (`AGENT_URL`).
    #[serde(default)]
    pub agent_url: Option<Url>,
    /// Protocol spoken with the agent (`AGENT_MODE`).
    pub agent_mode: AgentMode,
    /// Bearer token for the agent endpoint, if it needs one (`AGENT_API_KEY`).
    #[serde(default)]
    pub agent_api_key: Option<SecretString>,
    /// Model name sent in OpenAI-compatible mode (`AGENT_MODEL`).
    #[serde(default)]
    pub agent_model: Option<String>,
    /// Agent request timeout in seconds.
    pub agent_timeout_secs: u64,
    /// Slack Web API base (`SLACK_API_BASE`).
    pub slack_api_base: Url,
    /// Twilio REST API base (`TWILIO_API_BASE`).
    pub twilio_api_base: Url,
    /// Telegram Bot API base (`TELEGRAM_API_BASE`).
    pub telegram_api_base: Url,
    /// Resend API base (`RESEND_API_BASE`).
    pub resend_api_base: Url,
    /// Demo mode (seeded data, relaxed checks); refused in production.
    pub demo_mode: bool,
    /// Postgres connections this pod may open (`DB_POOL_SIZE`).
    pub db_pool_size: u32,
    /// How many pods are expected to run at once; used for the AA9 budget check.
    pub expected_pods: u32,
    /// Largest accepted request body in bytes (`BODY_LIMIT_BYTES`).
    pub body_limit_bytes: usize,
    /// Time between `/ready` turning 503 and the listener closing (`DRAIN_DELAY_MS`).
    pub drain_delay_ms: u64,
    /// Budget for in-flight requests and jobs to finish after the drain (`SHUTDOWN_BUDGET_SECS`).
    pub shutdown_budget_secs: u64,
    /// Timeout of each `/ready` dependency check (`READY_TIMEOUT_MS`).
    pub ready_timeout_ms: u64,
    /// Default tracing filter when `RUST_LOG` is unset (`LOG_LEVEL`).
    pub log_level: String,
    /// `LOG_FORMAT`; defaults to JSON in production and pretty elsewhere.
    #[serde(default)]
    pub log_format: Option<LogFormat>,
    /// Jobs one pod runs at once per queue (`WORKER_CONCURRENCY`).
    pub worker_concurrency: usize,
    /// How often an idle worker asks its queue for work it was not woken for: jobs coming
    /// due, and pushes announced while its notification subscription was down
    /// (`QUEUE_POLL_MS`). Every push wakes the workers of every pod at once.
    pub queue_poll_ms: u64,
    /// Webhooks in flight on a pod at which its jobs give way to the accept path and do their
    /// database work one at a time; 0 never gives way (`ACCEPT_PRIORITY_IN_FLIGHT`).
    pub accept_priority_in_flight: usize,
    /// Inbox events younger than this are left to the queue; older unprocessed ones are
    /// re-enqueued by the sweeper (`INBOX_GRACE_SECS`).
    pub inbox_grace_secs: u64,
    /// How long a job holds an inbox event before another may take it over; the running job
    /// renews it every third of this, so it bounds how long the event of a pod that died
    /// stays held (`INBOX_LEASE_SECS`).
    pub inbox_lease_secs: u64,
    /// Length of one inbox-sweeper slot (`INBOX_SWEEP_INTERVAL_MS`).
    pub inbox_sweep_interval_ms: u64,
    /// Failed attempts after which an inbox event is parked until an admin replays it
    /// (`INBOX_MAX_ATTEMPTS`).
    pub inbox_max_attempts: u32,
    /// Wait before the sweeper retries a failed event, doubled per failed attempt
    /// (`INBOX_RETRY_BASE_SECS`).
    pub inbox_retry_base_secs: u64,
    /// Longest wait between two attempts of one event (`INBOX_RETRY_MAX_SECS`).
    pub inbox_retry_max_secs: u64,
    /// Most events the sweeper re-enqueues per slot (`INBOX_SWEEP_BATCH`).
    pub inbox_sweep_batch: i64,
    /// Processed inbox events older than this are deleted; longer than any provider retries
    /// a webhook (`INBOX_RETENTION_DAYS`).
    pub inbox_retention_days: u64,
    /// Length of one inbox-pruning slot: one pod per slot prunes (`INBOX_PRUNE_INTERVAL_MS`).
    pub inbox_prune_interval_ms: u64,
    /// Longest message text stored from an inbound event; the raw payload keeps the rest
    /// (`INBOUND_TEXT_MAX_BYTES`).
    pub inbound_text_max_bytes: usize,
    /// Most conversation text sent to the agent for one draft, newest first
    /// (`AGENT_PROMPT_MAX_BYTES`).
    pub agent_prompt_max_bytes: usize,
    /// A connection that has not sent a whole request head within this is closed
    /// (`HTTP_HEADER_TIMEOUT_MS`).
    pub http_header_timeout_ms: u64,
    /// Whether the API port also speaks cleartext HTTP/2 (`HTTP2_CLEARTEXT`, off): hyper's
    /// HTTP/2 has no header-read or idle timeout, so it is pinged and stream-capped when on.
    #[serde(default)]
    pub http2_cleartext: bool,
    /// A request body not received in full within this (from the request's start) is
    /// answered 408 (`HTTP_BODY_TIMEOUT_MS`). Not applied to websockets.
    pub http_body_timeout_ms: u64,
    /// A REST or webhook request not answered within this is answered 408
    /// (`HTTP_REQUEST_TIMEOUT_MS`). Not applied to websockets.
    pub http_request_timeout_ms: u64,
    /// Serve `/metrics` on this address instead of the API port (`METRICS_ADDR`).
    #[serde(default)]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Identifies this pod in worker names, logs and metrics (`POD_ID`, default the hostname).
    #[serde(default)]
    pub pod_id: Option<String>,
    /// Realtime events older than this are deleted; a client further behind reloads its
    /// lists instead of replaying (`EVENTS_RETENTION_HOURS`).
    pub events_retention_hours: u64,
    /// How often each pod compares its Redis pub/sub subscriptions with what its Socket.IO
    /// adapter expects, and re-subscribes lost ones (`REALTIME_WATCHDOG_MS`).
    pub realtime_watchdog_ms: u64,
    /// Outbox rows still unsent this long after they were due are pushed to
    /// `channel-outbound` again by the outbox sweeper (`OUTBOX_GRACE_SECS`).
    pub outbox_grace_secs: u64,
    /// Length of one outbox-sweeper slot (`OUTBOX_SWEEP_INTERVAL_MS`).
    pub outbox_sweep_interval_ms: u64,
    /// How often each pod's realtime relay looks for committed events nobody woke it for
    /// (a pod that died right after its commit); a commit on this pod wakes it at once
    /// (`RELAY_POLL_MS`).
    pub relay_poll_ms: u64,
    /// Sockets one user may hold on one pod at once (`SOCKETS_PER_USER`; 0: no cap).
    pub sockets_per_user: u32,
    /// Sockets one client address (an IPv6 client's /64) may hold on one pod at once
    /// (`SOCKETS_PER_ADDRESS`; 0: no cap).
    pub sockets_per_address: u32,
    /// How long an `Idempotency-Key` and its stored response are kept (`IDEMPOTENCY_TTL_HOURS`,
    /// at least 24).
    pub idempotency_ttl_hours: u64,
    /// Each provider call (one message part) gives up after this long and counts as a
    /// failed attempt (`OUTBOUND_TIMEOUT_MS`).
    pub outbound_timeout_ms: u64,
    /// How long a `channel-outbound` job holds its outbox row; renewed every third of it
    /// while the provider is called, so it bounds how long the row of a pod that died stays
    /// held (`OUTBOX_LEASE_SECS`).
    pub outbox_lease_secs: u64,
    /// First retry delay of a failed provider call, doubled per attempt, with jitter
    /// (`OUTBOUND_RETRY_BASE_MS`).
    pub outbound_retry_base_ms: u64,
    /// Longest wait before a retry that a worker sleeps through; a longer one (a provider's
    /// `Retry-After`, an open breaker) reschedules the job instead (`OUTBOUND_MAX_INLINE_WAIT_MS`).
    pub outbound_max_inline_wait_ms: u64,
    /// Consecutive failed calls through one connection that open its circuit breaker on
    /// every pod (`OUTBOUND_BREAKER_THRESHOLD`).
    pub outbound_breaker_threshold: u32,
    /// How long an open breaker defers sends before one probe may go out
    /// (`OUTBOUND_BREAKER_COOLDOWN_MS`).
    pub outbound_breaker_cooldown_ms: u64,
    /// Length of one dead-letter worker slot (`DEAD_LETTER_INTERVAL_MS`).
    pub dead_letter_interval_ms: u64,
    /// Wait before the first dead-letter retry, doubled for each later one
    /// (`DEAD_LETTER_BACKOFF_MS`).
    pub dead_letter_backoff_ms: u64,
    /// Test-only fault injection (`FAULT_INJECT`), honoured only with `APP_ENV=test`:
    /// `release:after_commit:hang` stops a release right after its commit, as if the pod
    /// died there, so a test can kill it at exactly that point.
    #[serde(default)]
    pub fault_inject: Option<String>,
    /// Schedules of the scheduled jobs by job name (`SCHEDULE_{JOB}`, e.g.
    /// `SCHEDULE_DAILY_SUMMARY`): a cron expression with seconds (`sec min hour dom month
    /// dow`; five fields mean second 0) or `@every <n>ms|s|m|h`. See [`Config::schedule`].
    #[serde(default)]
    pub schedules: BTreeMap<String, String>,
    /// How long a scheduled run holds its slot before another pod may retry it; renewed
    /// every third of it while the job runs (`SCHEDULER_LEASE_MS`).
    pub scheduler_lease_ms: u64,
    /// How long `cron_runs` rows are kept (`SCHEDULER_HISTORY_HOURS`).
    pub scheduler_history_hours: u64,
    /// Jobs (comma separated) that do not run their latest missed slot at start-up
    /// (`SCHEDULER_SKIP_MISSED`); every other job does.
    #[serde(default)]
    pub scheduler_skip_missed: String,
    /// An alert is raised at most once per kind and subject in this window across all pods
    /// (`ALERT_WINDOW_SECS`).
    pub alert_window_secs: u64,
    /// Timeout of the `agent-health` probe (`AGENT_HEALTH_TIMEOUT_MS`).
    pub agent_health_timeout_ms: u64,
    /// Rate-limit policies by route group (`RATE_LIMIT_{POLICY}`): `<n>/<period>` such as
    /// `600/min`, `10/15min`, `5/s`, or `off`. See [`RATE_LIMIT_POLICIES`].
    #[serde(default)]
    pub rate_limits: BTreeMap<String, String>,
    /// Policies (comma separated, or `all`) that only count and log `would-have-blocked`
    /// and never refuse (`RATE_LIMIT_SHADOW`).
    #[serde(default)]
    pub rate_limit_shadow: String,
    /// How long a rate-limit decision waits for Redis before the pod decides alone
    /// (`RATE_LIMIT_REDIS_TIMEOUT_MS`).
    pub rate_limit_redis_timeout_ms: u64,
    /// Peers (comma-separated addresses or CIDR ranges) whose `X-Forwarded-For` is believed
    /// (`TRUSTED_PROXIES`); empty: the client is always the socket's peer.
    #[serde(default)]
    pub trusted_proxies: String,
    /// Requests one pod serves at once before it answers 503 `backpressure`; 0 is no
    /// limit (`MAX_IN_FLIGHT`). `/health`, `/ready` and `/metrics` are never refused.
    pub max_in_flight: usize,
    /// Waiting `channel-inbound` jobs at which webhooks get 503 `backpressure`; 0 never
    /// (`BACKPRESSURE_INBOUND_DEPTH`).
    pub backpressure_inbound_depth: usize,
    /// Waiting `channel-outbound` jobs at which releases, replies and dead-letter retries get
    /// 503 `backpressure`; 0 never (`BACKPRESSURE_OUTBOUND_DEPTH`).
    pub backpressure_outbound_depth: usize,
    /// How often each pod samples the queue depths (and the shared agent health) for
    /// backpressure and `/metrics` (`BACKPRESSURE_SAMPLE_MS`).
    pub backpressure_sample_ms: u64,
}

/// Every scheduled job (the `cron_runs.job` names).
pub const SCHEDULED_JOBS: &[&str] = &[
    "inbox-sweeper",
    "outbox-sweeper",
    "dead-letters",
    "inbox-retention",
    "events-retention",
    "idempotency-expiry",
    "queue-upkeep",
    "scheduler-prune",
    "snooze-resurface",
    "backlog-alert",
    "agent-health",
    "daily-summary",
    "weekly-report",
    "review-summary",
];

/// Every rate-limit policy (route groups).
pub const RATE_LIMIT_POLICIES: &[&str] = &[
    "default",
    "login_ip",
    "login_failures",
    "login_email",
    "webhook_unverified",
    "webhook_slack",
    "webhook_whatsapp",
    "webhook_telegram",
    "webhook_email",
    "socket",
];

impl Config {
    /// The drain delay as a [`Duration`].
    pub fn drain_delay(&self) -> Duration {
        Duration::from_millis(self.drain_delay_ms)
    }

    /// The shutdown budget as a [`Duration`].
    pub fn shutdown_budget(&self) -> Duration {
        Duration::from_secs(self.shutdown_budget_secs)
    }

    /// The per-dependency `/ready` timeout as a [`Duration`].
    pub fn ready_timeout(&self) -> Duration {
        Duration::from_millis(self.ready_timeout_ms)
    }

    /// The effective log format.
    pub fn log_format(&self) -> LogFormat {
        self.log_format.unwrap_or(match self.app_env {
            AppEnv::Production => LogFormat::Json,
            _ => LogFormat::Pretty,
        })
    }

    /// This pod's identity: `POD_ID`, else the host name, else `pod`.
    pub fn pod_id(&self) -> String {
        self.pod_id
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|s| s.trim().to_owned())
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "pod".to_owned())
    }

    /// The schedule of scheduled job `job`: `SCHEDULE_{JOB}`, else the defaults file; the
    /// sweepers that had an interval setting (`INBOX_SWEEP_INTERVAL_MS`,
    /// `OUTBOX_SWEEP_INTERVAL_MS`, `DEAD_LETTER_INTERVAL_MS`, `INBOX_PRUNE_INTERVAL_MS`) keep
    /// it as their default, `@every <interval>ms`.
    pub fn schedule(&self, job: &str) -> Option<String> {
        if let Some(s) = self.schedules.get(job).filter(|s| !s.trim().is_empty()) {
            return Some(s.clone());
        }
        let every = match job {
            "inbox-sweeper" => self.inbox_sweep_interval_ms,
            "outbox-sweeper" => self.outbox_sweep_interval_ms,
            "dead-letters" => self.dead_letter_interval_ms,
            "inbox-retention" => self.inbox_prune_interval_ms,
            _ => return None,
        };
        Some(format!("@every {}ms", every.max(100)))
    }

    /// Whether `job` runs its latest missed slot at start-up.
    pub fn catches_up(&self, job: &str) -> bool {
        !self
            .scheduler_skip_missed
            .split(',')
            .any(|j| j.trim() == job)
    }

    /// The rate-limit policy `name`'s setting (`off` when unset).
    pub fn rate_limit(&self, name: &str) -> &str {
        self.rate_limits.get(name).map_or("off", |s| s.trim())
    }

    /// Whether policy `name` runs in shadow mode.
    pub fn rate_limit_shadowed(&self, name: &str) -> bool {
        self.rate_limit_shadow
            .split(',')
            .map(str::trim)
            .any(|p| p == name || p == "all")
    }

    /// The public webhook URL for a connection, as given to the provider.
    pub fn webhook_url(&self, channel: &str, connection_id: &str) -> String {
        format!(
            "{}/webhooks/{channel}/{connection_id}",
            self.public_base_url.as_str().trim_end_matches('/')
        )
    }
}
