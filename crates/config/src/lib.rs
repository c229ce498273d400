//! Switchboard configuration (AA10: one source of config and secrets).
//!
//! Layers, later wins: the embedded `config/default.toml` → `config/{APP_ENV}.toml` (looked
//! up in `CONFIG_DIR`, default `config`) → environment variables. The shape is one section
//! per concern (`sections.rs`), and each field declares the variable that sets it, so the
//! variables are listed once: `[inbox] grace = "30s"` in a TOML file, `INBOX_GRACE_SECS=30`
//! in the environment, `config.inbox.grace` (a `Duration`) in the code. A secret may also be
//! given by reference as `{NAME}_FILE` (a path whose contents are the secret), which is how
//! container orchestrators mount them. Secrets are [`secrecy::SecretString`]s: `Debug` and
//! logs never show them. What a value must satisfy is checked once at load (`invariants.rs`;
//! production's own rules in `production.rs`), never adjusted where it is used.

mod env;
mod invariants;
mod keys;
mod load;
mod mail;
mod production;
mod rate;
mod redact;
pub mod sections;
mod tls;
mod traces;

pub use env::{Known, known_variable};
pub use load::{ConfigError, load, load_from};
pub use mail::{MailConfigError, MailTransport, SmtpServer, SmtpTls, SystemMail};
pub use production::Violation;
pub use rate::{RateError, RateSpec, parse_rate};
pub use redact::redact_url;
pub use sections::Config;
pub use tls::{
    PgTls, PoolerMode, RedisAuth, RedisEndpoint, RedisShape, RedisTls, SentinelSettings, TlsMode,
};
pub use traces::{OtlpProtocol, Root, SamplerName, Sampling, TraceExport};

use serde::Deserialize;
use switchboard_domain::ChannelKind;

/// `AUTOPILOT`: `off` turns every org's autopilot off when a pod starts (the deployment's
/// kill switch); `on` (the default) leaves each org's own setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    /// Each org's setting stands.
    On,
    /// Off for every org.
    Off,
}

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

impl AgentMode {
    /// Its `AGENT_MODE` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentMode::Switchboard => "switchboard",
            AgentMode::Openai => "openai",
        }
    }
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

/// Every scheduled job (the `cron_runs.job` names): [`switchboard_domain::JobName`]'s
/// spellings, so `SCHEDULE_{JOB}` knows exactly the jobs the scheduler runs.
pub const SCHEDULED_JOBS: &[&str] = switchboard_domain::JobName::SPELLINGS;

/// Every rate-limit policy (route groups), each channel's webhooks one of them
/// ([`ChannelKind::webhook_policy`]).
pub const RATE_LIMIT_POLICIES: &[&str] = &[
    "default",
    "login_ip",
    "login_failures",
    "login_email",
    "password_reset",
    "webhook_unverified",
    ChannelKind::Slack.webhook_policy(),
    ChannelKind::Whatsapp.webhook_policy(),
    ChannelKind::Telegram.webhook_policy(),
    ChannelKind::Email.webhook_policy(),
    "socket",
];

impl Config {
    /// The effective log format.
    pub fn log_format(&self) -> LogFormat {
        self.telemetry.log_format.unwrap_or(match self.app.env {
            AppEnv::Production => LogFormat::Json,
            _ => LogFormat::Pretty,
        })
    }

    /// This pod's identity: `POD_ID`, else the host name, else `pod`.
    pub fn pod_id(&self) -> String {
        self.app
            .pod_id
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
        if let Some(s) = self
            .scheduler
            .schedules
            .get(job)
            .filter(|s| !s.trim().is_empty())
        {
            return Some(s.clone());
        }
        let every = match job {
            "inbox-sweeper" => self.inbox.sweep_interval,
            "outbox-sweeper" => self.outbox.sweep_interval,
            "dead-letters" => self.outbound.dead_letter_interval,
            "inbox-retention" => self.inbox.prune_interval,
            _ => return None,
        };
        Some(format!("@every {}ms", every.as_millis()))
    }

    /// Whether `job` runs its latest missed slot at start-up.
    pub fn catches_up(&self, job: &str) -> bool {
        !self
            .scheduler
            .skip_missed
            .split(',')
            .any(|j| j.trim() == job)
    }

    /// The rate-limit policy `name`'s setting (`off` when unset).
    pub fn rate_limit(&self, name: &str) -> &str {
        self.rate_limit
            .policies
            .get(name)
            .map_or("off", |s| s.trim())
    }

    /// Whether policy `name` runs in shadow mode.
    pub fn rate_limit_shadowed(&self, name: &str) -> bool {
        self.rate_limit
            .shadow
            .split(',')
            .map(str::trim)
            .any(|p| p == name || p == "all")
    }

    /// The public webhook URL for a connection, as given to the provider.
    pub fn webhook_url(&self, channel: &str, connection_id: &str) -> String {
        format!(
            "{}/webhooks/{channel}/{connection_id}",
            self.http.public_base_url.as_str().trim_end_matches('/')
        )
    }
}
