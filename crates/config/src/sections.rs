//! The configuration of one pod, a section per concern. Each field names the variable that
//! sets it and how that variable is read (see `env.rs`); the TOML files use the same shape
//! (`[inbox] grace = "30s"`). Defaults are in `config/default.toml`; a field without one
//! is required, or an `Option` that is unset by default. Bounds and cross-field rules are
//! in `invariants.rs`, checked once at load.

use crate::env::settings;
use crate::traces::{OtlpProtocol, SamplerName};
use crate::{
    AgentMode, AppEnv, LogFormat, PoolerMode, RATE_LIMIT_POLICIES, SCHEDULED_JOBS, Switch, TlsMode,
};
use secrecy::SecretString;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use switchboard_domain::alerts::Severity;
use url::Url;

settings! {
    /// The validated configuration of one pod.
    pub struct Config {
        /// What this process is and how many of it run.
        app: App {
            /// `development`, `test` or `production`; production turns on the start-up
            /// invariants.
            env: AppEnv = Text("APP_ENV"),
            /// Demo mode (seeded data, relaxed checks); refused in production.
            demo_mode: bool = Value("DEMO_MODE"),
            /// Identifies this pod in worker names, logs and metrics (default the host name,
            /// see [`Config::pod_id`]).
            pod_id: Option<String> = Text("POD_ID"),
            /// How many pods are expected to run at once: the AA9 budget check, and each
            /// pod's share of a rate limit when Redis is away.
            expected_pods: u32 = Value("EXPECTED_PODS"),
            /// Test-only fault injection, honoured only with `APP_ENV=test`:
            /// `release:after_commit:hang` stops a release right after its commit, as if the
            /// pod died there, so a test can kill it at exactly that point.
            fault_inject: Option<String> = Text("FAULT_INJECT"),
        },
        /// The HTTP listener and what it accepts.
        http: Http {
            /// Address the listener binds.
            bind_addr: IpAddr = Text("BIND_ADDR"),
            /// The listener's port (0 picks a free port, used by tests).
            port: u16 = Value("PORT"),
            /// The URL providers call; webhook URLs and Twilio signatures are built from it.
            public_base_url: Url = Text("PUBLIC_BASE_URL"),
            /// Largest accepted request body in bytes.
            body_limit_bytes: usize = Value("BODY_LIMIT_BYTES"),
            /// A connection that has not sent a whole request head within this is closed.
            header_timeout: Duration = Millis("HTTP_HEADER_TIMEOUT_MS"),
            /// A request body not received in full within this (from the request's start) is
            /// answered 408. Not applied to websockets.
            body_timeout: Duration = Millis("HTTP_BODY_TIMEOUT_MS"),
            /// A REST or webhook request not answered within this is answered 408. Not
            /// applied to websockets.
            request_timeout: Duration = Millis("HTTP_REQUEST_TIMEOUT_MS"),
            /// Whether the port also speaks cleartext HTTP/2: hyper's HTTP/2 has no
            /// header-read or idle timeout, so it is pinged and stream-capped when on.
            http2_cleartext: bool = Value("HTTP2_CLEARTEXT"),
            /// Peers (comma-separated addresses or CIDR ranges) whose `X-Forwarded-For` is
            /// believed; empty: the client is always the socket's peer.
            trusted_proxies: String = Text("TRUSTED_PROXIES"),
            /// How long an `Idempotency-Key` and its stored response are kept.
            idempotency_ttl: Duration = Hours("IDEMPOTENCY_TTL_HOURS"),
        },
        /// Readiness and graceful shutdown.
        lifecycle: Lifecycle {
            /// Time between `/ready` turning 503 and the listener closing.
            drain_delay: Duration = Millis("DRAIN_DELAY_MS"),
            /// Budget for in-flight requests and jobs to finish after the drain.
            shutdown_budget: Duration = Secs("SHUTDOWN_BUDGET_SECS"),
            /// Timeout of each `/ready` dependency check.
            ready_timeout: Duration = Millis("READY_TIMEOUT_MS"),
        },
        /// Postgres, and the pooler in front of it.
        database: Database {
            /// What the pods' pool connects to: a pooler such as RDS Proxy or PgBouncer, or
            /// Postgres itself.
            url: SecretString = Secret("DATABASE_URL"),
            /// Postgres itself, for work that needs a whole session (`switchboard migrate`
            /// takes a session lock); see [`Config::database_direct_url`].
            direct_url: Option<SecretString> = Secret("DATABASE_DIRECT_URL"),
            /// Unset: the URL's `sslmode`, or `verify` in production.
            tls: Option<TlsMode> = Text("DATABASE_TLS"),
            /// A PEM bundle (RDS's, say) trusted besides the system roots.
            tls_ca: Option<PathBuf> = Text("DATABASE_TLS_CA"),
            /// `transaction` when a transaction-mode pooler is in front.
            pooler: PoolerMode = Text("DATABASE_POOLER"),
            /// Postgres connections this pod may open.
            pool_size: u32 = Value("DB_POOL_SIZE"),
            /// The connections this service may hold on the server side (a pooler's budget
            /// for it); used instead of `SHOW max_connections` for AA9 when set.
            max_connections: Option<u32> = Value("DB_MAX_CONNECTIONS"),
        },
        /// Redis: one server, a cluster, or a master found through sentinels.
        redis: Redis {
            /// One Redis server; required in production unless `cluster_nodes` is set (no
            /// silent in-memory fallback).
            url: Option<SecretString> = Secret("REDIS_URL"),
            /// Comma-separated seed URLs of a Redis Cluster. When set, every Redis user runs
            /// on the cluster and `url` is not needed.
            cluster_nodes: Option<SecretString> = Secret("REDIS_CLUSTER_NODES"),
            /// Comma-separated Redis Sentinel addresses (`host:port`, `redis://` or
            /// `rediss://`). When set, every Redis user runs on the master the sentinels
            /// name `sentinel_master` and follows it through a failover; `url` is not needed.
            sentinels: Option<SecretString> = Secret("REDIS_SENTINELS"),
            /// The master's name in the sentinels' configuration (`sentinel monitor NAME …`).
            sentinel_master: Option<String> = Text("REDIS_SENTINEL_MASTER"),
            /// The sentinels' own ACL user, when they ask for one.
            sentinel_username: Option<String> = Text("REDIS_SENTINEL_USERNAME"),
            /// The sentinels' own password (their `requirepass`), when they ask for one.
            sentinel_password: Option<SecretString> = Secret("REDIS_SENTINEL_PASSWORD"),
            /// The data nodes' ACL user when they are found through sentinels (with
            /// `url` or `cluster_nodes` the user goes in the URL).
            username: Option<String> = Text("REDIS_USERNAME"),
            /// The data nodes' password when they are found through sentinels.
            password: Option<SecretString> = Secret("REDIS_PASSWORD"),
            /// Unset: follows the URL's scheme (`rediss://` verifies).
            tls: Option<TlsMode> = Text("REDIS_TLS"),
            /// A PEM bundle trusted besides the system roots.
            tls_ca: Option<PathBuf> = Text("REDIS_TLS_CA"),
            /// Every Redis key this pod writes starts with `{prefix}:`.
            prefix: String = Text("REDIS_PREFIX"),
        },
        /// Login tokens.
        auth: Auth {
            /// HS256 signing secret: a one-key [`Auth::jwt_secrets`]. Set this or that, not
            /// both; read them through [`Config::jwt_secrets`].
            jwt_secret: Option<SecretString> = Secret("JWT_SECRET"),
            /// HS256 secrets separated by commas or newlines: the first signs, every one
            /// verifies (a token names its key by `kid`), so a key can be rotated.
            jwt_secrets: Option<SecretString> = Secret("JWT_SECRETS"),
            /// Lifetime of a login token.
            jwt_ttl: Duration = Secs("JWT_TTL_SECS"),
        },
        /// The channels' provider APIs, and the key to the connections' secrets.
        channels: Channels {
            /// Base64 (or hex) of the 32-byte AES-256-GCM key for channel secrets: a one-key
            /// [`Channels::master_encryption_keys`]. Set this or that, not both; read them
            /// through [`Config::master_keys`].
            master_encryption_key: Option<SecretString> = Secret("MASTER_ENCRYPTION_KEY"),
            /// Such keys separated by commas or newlines: the first encrypts, every one
            /// decrypts (a stored secret names its key by id), so a key can be rotated.
            master_encryption_keys: Option<SecretString> = Secret("MASTER_ENCRYPTION_KEYS"),
            /// Slack Web API base.
            slack_api_base: Url = Text("SLACK_API_BASE"),
            /// Twilio REST API base, for WhatsApp.
            whatsapp_api_base: Url = Text("TWILIO_API_BASE"),
            /// Telegram Bot API base.
            telegram_api_base: Url = Text("TELEGRAM_API_BASE"),
            /// Resend API base (it also serves inbound email bodies).
            resend_api_base: Url = Text("RESEND_API_BASE"),
        },
        /// The drafting agent.
        agent: Agent {
            /// Where the agent listens.
            url: Option<Url> = Text("AGENT_URL"),
            /// Protocol spoken with the agent.
            mode: AgentMode = Text("AGENT_MODE"),
            /// Bearer token for the agent endpoint, if it needs one.
            api_key: Option<SecretString> = Secret("AGENT_API_KEY"),
            /// Model name sent in OpenAI-compatible mode.
            model: String = Text("AGENT_MODEL"),
            /// Timeout of one agent request.
            timeout: Duration = Secs("AGENT_TIMEOUT_SECS"),
            /// Most conversation text sent to the agent for one draft, newest first.
            prompt_max_bytes: usize = Value("AGENT_PROMPT_MAX_BYTES"),
            /// Timeout of the `agent-health` probe.
            health_timeout: Duration = Millis("AGENT_HEALTH_TIMEOUT_MS"),
        },
        /// Logs, errors and metrics.
        telemetry: Telemetry {
            /// Default tracing filter when `RUST_LOG` is unset.
            log_level: String = Text("LOG_LEVEL"),
            /// Defaults to JSON in production and pretty elsewhere (see
            /// [`Config::log_format`]).
            log_format: Option<LogFormat> = Text("LOG_FORMAT"),
            /// Where errors go; required in production.
            sentry_dsn: Option<SecretString> = Secret("SENTRY_DSN"),
            /// Serve `/metrics` on this address instead of the API port.
            metrics_addr: Option<SocketAddr> = Text("METRICS_ADDR"),
        },
        /// OpenTelemetry trace export (docs/OPERATIONS.md, "Tracing"): the standard `OTEL_*`
        /// variables, read through [`Config::trace_export`]; off without an endpoint.
        traces: Traces {
            /// The collector: `http://host:4318` for `http/protobuf` (`/v1/traces` is
            /// appended), `http://host:4317` for `grpc`; `https://` for TLS with either.
            /// Unset: no export at all.
            endpoint: Option<Url> = Text("OTEL_EXPORTER_OTLP_ENDPOINT"),
            /// `http/protobuf` or `grpc`.
            protocol: OtlpProtocol = Text("OTEL_EXPORTER_OTLP_PROTOCOL"),
            /// `key=value,…` headers sent with every export; a secret (an API key, usually).
            headers: Option<SecretString> = Secret("OTEL_EXPORTER_OTLP_HEADERS"),
            /// A PEM file of the CA that signed an `https://` collector's certificate, added
            /// to the system roots (a collector behind a private CA).
            certificate: Option<PathBuf> = Text("OTEL_EXPORTER_OTLP_CERTIFICATE"),
            /// Longest wait for one export, in milliseconds (the standard variable's unit).
            timeout_ms: u64 = Value("OTEL_EXPORTER_OTLP_TIMEOUT"),
            /// `service.name` of every span.
            service_name: String = Text("OTEL_SERVICE_NAME"),
            /// Which traces are recorded: `always_on`, `always_off`, `traceidratio`,
            /// `parentbased_always_on`, `parentbased_always_off`, `parentbased_traceidratio`.
            sampler: SamplerName = Text("OTEL_TRACES_SAMPLER"),
            /// The ratio of the `*traceidratio` samplers, from 0 to 1 (default 1).
            sampler_arg: Option<String> = Text("OTEL_TRACES_SAMPLER_ARG"),
            /// `key=value,…` resource attributes added to every span's resource.
            resource_attributes: String = Text("OTEL_RESOURCE_ATTRIBUTES"),
            /// Finished spans held while the collector is slow or away; beyond it spans are
            /// dropped and counted (`trace_spans_dropped_total`).
            queue_size: usize = Value("OTEL_BSP_MAX_QUEUE_SIZE"),
            /// Longest a finished span waits before its batch is sent, in milliseconds.
            schedule_delay_ms: u64 = Value("OTEL_BSP_SCHEDULE_DELAY"),
        },
        /// The queue workers of this pod.
        workers: Workers {
            /// Jobs one pod runs at once per queue; 0 runs no workers (HTTP and sockets
            /// only).
            concurrency: usize = Value("WORKER_CONCURRENCY"),
            /// How often an idle worker asks its queue for work it was not woken for: jobs
            /// coming due, and pushes announced while its notification subscription was down.
            /// Every push wakes the workers of every pod at once.
            queue_poll: Duration = Millis("QUEUE_POLL_MS"),
            /// Inbound jobs one pod runs at once; 0, or `WORKER_CONCURRENCY=0`, runs none. A
            /// job spends most of its time waiting for the agent and for the pod's shared
            /// statements, so many at once cost little, and every statement then carries
            /// more events.
            inbound_concurrency: usize = Value("INBOUND_CONCURRENCY"),
            /// Webhooks in flight on a pod at which its jobs give way to the accept path and
            /// do their database work one at a time; 0 (the default) never gives way. They
            /// stop giving way while the inbound backlog is at `PACING_BACKLOG`.
            accept_priority_in_flight: usize = Value("ACCEPT_PRIORITY_IN_FLIGHT"),
            /// Waiting inbound jobs (as the sampler last counted them) at which a pod paces
            /// its webhooks by its processing; 0 never paces.
            pacing_backlog: usize = Value("PACING_BACKLOG"),
            /// While pacing, webhooks a pod accepts per event it processes; 0 never paces.
            accept_per_processed: usize = Value("ACCEPT_PER_PROCESSED"),
            /// Longest a paced webhook waits for its turn before it is accepted anyway.
            pacing_max_wait: Duration = Millis("PACING_MAX_WAIT_MS"),
        },
        /// Inbound events: the inbox, its sweeper and its retries.
        inbox: Inbox {
            /// Inbox events younger than this are left to the queue; older unprocessed ones
            /// are re-enqueued by the sweeper.
            grace: Duration = Secs("INBOX_GRACE_SECS"),
            /// How long a job holds an inbox event before another may take it over; the
            /// running job renews it every third of this, so it bounds how long the event of
            /// a pod that died stays held.
            lease: Duration = Secs("INBOX_LEASE_SECS"),
            /// Length of one inbox-sweeper slot (its schedule unless `SCHEDULE_INBOX_SWEEPER`
            /// is set).
            sweep_interval: Duration = Millis("INBOX_SWEEP_INTERVAL_MS"),
            /// Failed attempts after which an event is parked until an admin replays it.
            max_attempts: i32 = Value("INBOX_MAX_ATTEMPTS"),
            /// Wait before the sweeper retries a failed event, doubled per failed attempt.
            retry_base: Duration = Secs("INBOX_RETRY_BASE_SECS"),
            /// Longest wait between two attempts of one event.
            retry_max: Duration = Secs("INBOX_RETRY_MAX_SECS"),
            /// Most events the sweeper re-enqueues per slot.
            sweep_batch: i64 = Value("INBOX_SWEEP_BATCH"),
            /// Processed events older than this are deleted; longer than any provider
            /// retries a webhook.
            retention: Duration = Days("INBOX_RETENTION_DAYS"),
            /// Length of one inbox-pruning slot: one pod per slot prunes.
            prune_interval: Duration = Millis("INBOX_PRUNE_INTERVAL_MS"),
            /// Longest message text stored from an inbound event; the raw payload keeps the
            /// rest.
            text_max_bytes: usize = Value("INBOUND_TEXT_MAX_BYTES"),
        },
        /// Replies waiting to be sent: the outbox and its sweeper.
        outbox: Outbox {
            /// Rows still unsent this long after they were due are pushed to
            /// `channel-outbound` again by the outbox sweeper.
            grace: Duration = Secs("OUTBOX_GRACE_SECS"),
            /// How long a `channel-outbound` job holds its row; renewed every third of it
            /// while the provider is called, so it bounds how long the row of a pod that died
            /// stays held.
            lease: Duration = Secs("OUTBOX_LEASE_SECS"),
            /// Length of one outbox-sweeper slot.
            sweep_interval: Duration = Millis("OUTBOX_SWEEP_INTERVAL_MS"),
        },
        /// What the server does with its customers' data on an org's request.
        privacy: Privacy {
            /// How long an attempt at a customer's erasure holds it before another pod's
            /// `customer-erasure` job may take it up (the pod died mid-way); well above what
            /// one erasure takes.
            erasure_lease: Duration = Millis("ERASURE_LEASE_MS"),
            /// The most of its time the `org-retention` purge spends in its statements, in
            /// percent: after a batch that took `t` it waits `t × (100 / duty − 1)` (at most
            /// 5 s), so a purge of years of rows leaves Postgres to the webhooks most of the
            /// time. 100 never waits.
            retention_duty_percent: u32 = Value("RETENTION_DUTY_PERCENT"),
        },
        /// Drafts that send themselves under an org's policy.
        autopilot: Autopilot {
            /// `off`: every org's autopilot is turned off when a pod starts.
            mode: Switch = Text("AUTOPILOT"),
        },
        /// Provider calls: timeouts, retries, the breaker and the dead letters.
        outbound: Outbound {
            /// Each provider call (one message part) gives up after this long and counts as a
            /// failed attempt.
            timeout: Duration = Millis("OUTBOUND_TIMEOUT_MS"),
            /// First retry delay of a failed call, doubled per attempt, with jitter.
            retry_base: Duration = Millis("OUTBOUND_RETRY_BASE_MS"),
            /// Longest wait before a retry that a worker sleeps through; a longer one (a
            /// provider's `Retry-After`, an open breaker) reschedules the job instead.
            max_inline_wait: Duration = Millis("OUTBOUND_MAX_INLINE_WAIT_MS"),
            /// Consecutive failed calls through one connection that open its circuit breaker
            /// on every pod.
            breaker_threshold: u32 = Value("OUTBOUND_BREAKER_THRESHOLD"),
            /// How long an open breaker defers sends before one probe may go out.
            breaker_cooldown: Duration = Millis("OUTBOUND_BREAKER_COOLDOWN_MS"),
            /// Length of one dead-letter worker slot.
            dead_letter_interval: Duration = Millis("DEAD_LETTER_INTERVAL_MS"),
            /// Wait before the first dead-letter retry, doubled for each later one.
            dead_letter_backoff: Duration = Millis("DEAD_LETTER_BACKOFF_MS"),
        },
        /// Socket.IO, the event relay and the events log.
        realtime: Realtime {
            /// Events older than this are deleted; a client further behind reloads its lists
            /// instead of replaying.
            events_retention: Duration = Hours("EVENTS_RETENTION_HOURS"),
            /// How often each pod compares its Redis pub/sub subscriptions with what its
            /// Socket.IO adapter expects, and re-subscribes lost ones.
            watchdog_interval: Duration = Millis("REALTIME_WATCHDOG_MS"),
            /// How often the relay looks for committed events nobody woke it for (a pod that
            /// died right after its commit); a commit on this pod wakes it at once.
            relay_poll: Duration = Millis("RELAY_POLL_MS"),
            /// Sockets one user may hold on one pod at once (0: no cap).
            sockets_per_user: u32 = Value("SOCKETS_PER_USER"),
            /// Sockets one client address (an IPv6 client's /64) may hold on one pod at once
            /// (0: no cap).
            sockets_per_address: u32 = Value("SOCKETS_PER_ADDRESS"),
        },
        /// The scheduled jobs, once per slot across all pods.
        scheduler: Scheduler {
            /// Schedules by job name (`SCHEDULE_DAILY_SUMMARY`): a cron expression with
            /// seconds (`sec min hour dom month dow`; five fields mean second 0) or
            /// `@every <n>ms|s|m|h`. See [`Config::schedule`].
            schedules: BTreeMap<String, String> = Table("SCHEDULE_", SCHEDULED_JOBS),
            /// How long a run holds its slot before another pod may retry it; renewed every
            /// third of it while the job runs.
            lease: Duration = Millis("SCHEDULER_LEASE_MS"),
            /// How long `cron_runs` rows (and alert claims) are kept.
            history: Duration = Hours("SCHEDULER_HISTORY_HOURS"),
            /// Most successful runs kept per job within the history (a job on a schedule of
            /// seconds keeps only its latest), so no schedule grows `cron_runs` past this.
            history_runs: i64 = Value("SCHEDULER_HISTORY_RUNS"),
            /// Jobs (comma separated) that do not run their latest missed slot at start-up;
            /// every other job does.
            skip_missed: String = Text("SCHEDULER_SKIP_MISSED"),
        },
        /// Operational alerts: where incidents go, and the queue alert's thresholds.
        alerts: Alerts {
            /// When Postgres cannot record an incident, its log line is raised at most once
            /// per kind and scope in this window across all pods.
            window: Duration = Secs("ALERT_WINDOW_SECS"),
            /// A Slack incoming webhook that gets triggers and resolves.
            slack_webhook_url: Option<SecretString> = Secret("ALERT_SLACK_WEBHOOK_URL"),
            /// The least severity sent to Slack (`info`, `warning`, `critical`).
            slack_min_severity: Severity = Text("ALERT_SLACK_MIN_SEVERITY"),
            /// PagerDuty's Events API v2 endpoint.
            pagerduty_url: Url = Text("ALERT_PAGERDUTY_URL"),
            /// The PagerDuty service's integration (routing) key; unset: no PagerDuty.
            pagerduty_routing_key: Option<SecretString> = Secret("ALERT_PAGERDUTY_ROUTING_KEY"),
            /// The least severity sent to PagerDuty.
            pagerduty_min_severity: Severity = Text("ALERT_PAGERDUTY_MIN_SEVERITY"),
            /// A generic JSON webhook, signed the Standard Webhooks way.
            webhook_url: Option<Url> = Text("ALERT_WEBHOOK_URL"),
            /// The generic webhook's signing secret (`whsec_` and base64, as Standard
            /// Webhooks issues them); required with `ALERT_WEBHOOK_URL`.
            webhook_secret: Option<SecretString> = Secret("ALERT_WEBHOOK_SECRET"),
            /// The least severity sent to the generic webhook.
            webhook_min_severity: Severity = Text("ALERT_WEBHOOK_MIN_SEVERITY"),
            /// Inbound events waiting in the Postgres inbox above which `queue_backlog`
            /// opens.
            queue_waiting: i64 = Value("ALERT_QUEUE_WAITING"),
            /// Events that failed processing or delivery in the last 5 minutes above which
            /// `queue_backlog` opens.
            queue_failed: i64 = Value("ALERT_QUEUE_FAILED"),
        },
        /// Rate limits, shared by all pods.
        rate_limit: RateLimit {
            /// Policies by route group: `<n>/<period>` such as `600/min`, `10/15min`, `5/s`,
            /// or `off`. See [`RATE_LIMIT_POLICIES`].
            policies: BTreeMap<String, String> = Table("RATE_LIMIT_", RATE_LIMIT_POLICIES),
            /// Policies (comma separated, or `all`) that only count and log
            /// `would-have-blocked` and never refuse.
            shadow: String = Text("RATE_LIMIT_SHADOW"),
            /// How long a decision waits for Redis before the pod decides alone.
            redis_timeout: Duration = Millis("RATE_LIMIT_REDIS_TIMEOUT_MS"),
        },
        /// When a pod answers 503 `backpressure` instead of taking more work.
        backpressure: Backpressure {
            /// Requests one pod serves at once; 0 is no limit. `/health`, `/ready` and
            /// `/metrics` are never refused.
            max_in_flight: usize = Value("MAX_IN_FLIGHT"),
            /// Waiting `channel-inbound` jobs at which webhooks are refused; 0 never.
            inbound_depth: usize = Value("BACKPRESSURE_INBOUND_DEPTH"),
            /// Waiting `channel-outbound` jobs at which releases, replies and dead-letter
            /// retries are refused; 0 never.
            outbound_depth: usize = Value("BACKPRESSURE_OUTBOUND_DEPTH"),
            /// How often each pod samples the queue depths (and the shared agent health).
            sample_interval: Duration = Millis("BACKPRESSURE_SAMPLE_MS"),
        },
        /// System mail (operators' alerts; later invitations and password resets): through
        /// Resend or an SMTP server, one of them; off when neither is set. Read as a whole
        /// by [`Config::system_mail`].
        mail: Mail {
            /// The sender, `address` or `Name <address>`; required with a transport.
            from: Option<String> = Text("MAIL_FROM"),
            /// A Resend API key: system mail goes to `POST {RESEND_API_BASE}/emails`.
            resend_api_key: Option<SecretString> = Secret("MAIL_RESEND_API_KEY"),
            /// An SMTP server: `smtp://user:pass@host:587` (STARTTLS), `smtps://…`
            /// (implicit TLS) or `smtp://host:25?tls=off` (plaintext, this machine only in
            /// production). A secret: it carries the password.
            smtp_url: Option<SecretString> = Secret("MAIL_SMTP_URL"),
        },
    }
}
