//! Building a [`Config`] from the three layers and validating it once.

use crate::{AppEnv, Config};
use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const DEFAULTS: &str = include_str!("../../../config/default.toml");

/// Keys read from the environment, and whether their value is taken verbatim (strings,
/// secrets, URLs) or parsed (numbers, booleans).
const ENV_KEYS: &[(&str, Kind)] = &[
    ("app_env", Kind::Verbatim),
    ("bind_addr", Kind::Verbatim),
    ("port", Kind::Parsed),
    ("database_url", Kind::Verbatim),
    ("database_direct_url", Kind::Verbatim),
    ("database_tls", Kind::Verbatim),
    ("database_tls_ca", Kind::Verbatim),
    ("database_pooler", Kind::Verbatim),
    ("db_max_connections", Kind::Parsed),
    ("redis_url", Kind::Verbatim),
    ("redis_cluster_nodes", Kind::Verbatim),
    ("redis_tls", Kind::Verbatim),
    ("redis_tls_ca", Kind::Verbatim),
    ("redis_prefix", Kind::Verbatim),
    ("jwt_secret", Kind::Verbatim),
    ("jwt_ttl_secs", Kind::Parsed),
    ("master_encryption_key", Kind::Verbatim),
    ("sentry_dsn", Kind::Verbatim),
    ("public_base_url", Kind::Verbatim),
    ("agent_url", Kind::Verbatim),
    ("agent_mode", Kind::Verbatim),
    ("agent_api_key", Kind::Verbatim),
    ("agent_model", Kind::Verbatim),
    ("agent_timeout_secs", Kind::Parsed),
    ("slack_api_base", Kind::Verbatim),
    ("twilio_api_base", Kind::Verbatim),
    ("telegram_api_base", Kind::Verbatim),
    ("resend_api_base", Kind::Verbatim),
    ("demo_mode", Kind::Parsed),
    ("db_pool_size", Kind::Parsed),
    ("expected_pods", Kind::Parsed),
    ("body_limit_bytes", Kind::Parsed),
    ("drain_delay_ms", Kind::Parsed),
    ("shutdown_budget_secs", Kind::Parsed),
    ("ready_timeout_ms", Kind::Parsed),
    ("log_level", Kind::Verbatim),
    ("log_format", Kind::Verbatim),
    ("pod_id", Kind::Verbatim),
    ("worker_concurrency", Kind::Parsed),
    ("queue_poll_ms", Kind::Parsed),
    ("accept_priority_in_flight", Kind::Parsed),
    ("inbox_grace_secs", Kind::Parsed),
    ("inbox_lease_secs", Kind::Parsed),
    ("inbox_sweep_interval_ms", Kind::Parsed),
    ("inbox_max_attempts", Kind::Parsed),
    ("inbox_retry_base_secs", Kind::Parsed),
    ("inbox_retry_max_secs", Kind::Parsed),
    ("inbox_sweep_batch", Kind::Parsed),
    ("inbox_retention_days", Kind::Parsed),
    ("inbox_prune_interval_ms", Kind::Parsed),
    ("inbound_text_max_bytes", Kind::Parsed),
    ("agent_prompt_max_bytes", Kind::Parsed),
    ("http_header_timeout_ms", Kind::Parsed),
    ("http_body_timeout_ms", Kind::Parsed),
    ("http_request_timeout_ms", Kind::Parsed),
    ("metrics_addr", Kind::Verbatim),
    ("events_retention_hours", Kind::Parsed),
    ("realtime_watchdog_ms", Kind::Parsed),
    ("outbox_grace_secs", Kind::Parsed),
    ("outbox_sweep_interval_ms", Kind::Parsed),
    ("relay_poll_ms", Kind::Parsed),
    ("http2_cleartext", Kind::Parsed),
    ("sockets_per_user", Kind::Parsed),
    ("sockets_per_address", Kind::Parsed),
    ("idempotency_ttl_hours", Kind::Parsed),
    ("outbound_timeout_ms", Kind::Parsed),
    ("outbox_lease_secs", Kind::Parsed),
    ("outbound_retry_base_ms", Kind::Parsed),
    ("outbound_max_inline_wait_ms", Kind::Parsed),
    ("outbound_breaker_threshold", Kind::Parsed),
    ("outbound_breaker_cooldown_ms", Kind::Parsed),
    ("dead_letter_interval_ms", Kind::Parsed),
    ("dead_letter_backoff_ms", Kind::Parsed),
    ("fault_inject", Kind::Verbatim),
    ("scheduler_lease_ms", Kind::Parsed),
    ("scheduler_history_hours", Kind::Parsed),
    ("scheduler_skip_missed", Kind::Verbatim),
    ("alert_window_secs", Kind::Parsed),
    ("agent_health_timeout_ms", Kind::Parsed),
    ("rate_limit_shadow", Kind::Verbatim),
    ("rate_limit_redis_timeout_ms", Kind::Parsed),
    ("trusted_proxies", Kind::Verbatim),
    ("max_in_flight", Kind::Parsed),
    ("backpressure_inbound_depth", Kind::Parsed),
    ("backpressure_outbound_depth", Kind::Parsed),
    ("backpressure_sample_ms", Kind::Parsed),
];

/// Tables whose entries are set one variable each: `SCHEDULE_{JOB}` (job names upper-cased,
/// `-` as `_`) and `RATE_LIMIT_{POLICY}`.
const ENV_TABLES: &[(&str, &str, &[&str])] = &[
    ("schedules", "SCHEDULE_", crate::SCHEDULED_JOBS),
    ("rate_limits", "RATE_LIMIT_", crate::RATE_LIMIT_POLICIES),
];

/// Secrets that may be passed by reference as `{NAME}_FILE`.
const SECRET_KEYS: &[&str] = &[
    "database_url",
    "database_direct_url",
    "redis_url",
    "redis_cluster_nodes",
    "jwt_secret",
    "master_encryption_key",
    "sentry_dsn",
    "agent_api_key",
];

#[derive(Clone, Copy)]
enum Kind {
    Verbatim,
    Parsed,
}

/// Why configuration could not be loaded. Messages never contain secret values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A layer could not be read or a value has the wrong type or is missing.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// A `{NAME}_FILE` reference could not be read.
    #[error("cannot read {var} from {path}: {source}")]
    SecretFile {
        /// The `_FILE` variable.
        var: String,
        /// The file it names.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Loads the configuration from the process environment and `CONFIG_DIR` (default `config`).
pub fn load() -> Result<Config, ConfigError> {
    let vars: HashMap<String, String> = std::env::vars().collect();
    let dir = vars
        .get("CONFIG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("config"));
    load_from(&vars, &dir)
}

/// Loads the configuration from the given variables and config directory; `load()` without
/// touching the process environment, so tests can run side by side.
pub fn load_from(vars: &HashMap<String, String>, config_dir: &Path) -> Result<Config, ConfigError> {
    let env_layer = env_layer(vars)?;
    let app_env = match env_layer.get("app_env") {
        Some(Value::String(_, name)) => name.clone(),
        _ => Figment::from(Toml::string(DEFAULTS))
            .extract_inner::<String>("app_env")
            .map_err(|e| ConfigError::Invalid(e.to_string()))?,
    };
    let env_file = config_dir.join(format!("{app_env}.toml"));
    let config: Config = Figment::from(Toml::string(DEFAULTS))
        .merge(Toml::file(env_file))
        .merge(Serialized::defaults(env_layer))
        .extract()
        .map_err(|e| ConfigError::Invalid(describe(e)))?;
    config.check_shape()?;
    Ok(config)
}

/// The environment layer: known keys only (so `HOST`, `PATH` and friends never leak in),
/// with `{NAME}_FILE` references resolved.
fn env_layer(vars: &HashMap<String, String>) -> Result<Dict, ConfigError> {
    let mut dict = Dict::new();
    for (key, kind) in ENV_KEYS {
        let upper = key.to_ascii_uppercase();
        let mut value = vars.get(&upper).cloned();
        if SECRET_KEYS.contains(key) {
            let file_var = format!("{upper}_FILE");
            if let Some(path) = vars.get(&file_var) {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::SecretFile {
                        var: file_var.clone(),
                        path: PathBuf::from(path),
                        source,
                    })?;
                value = Some(text.trim_end_matches(['\n', '\r']).to_owned());
            }
        }
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            continue;
        };
        let value = match kind {
            Kind::Verbatim => Value::from(value),
            Kind::Parsed => value
                .parse::<Value>()
                .map_err(|_| ConfigError::Invalid(format!("{upper} is not a valid value")))?,
        };
        dict.insert((*key).to_owned(), value);
    }
    for (table, prefix, names) in ENV_TABLES {
        let mut entries = Dict::new();
        for name in *names {
            let var = format!("{prefix}{}", name.to_ascii_uppercase().replace('-', "_"));
            if let Some(value) = vars.get(&var).filter(|v| !v.is_empty()) {
                entries.insert((*name).to_owned(), Value::from(value.clone()));
            }
        }
        if !entries.is_empty() {
            dict.insert((*table).to_owned(), Value::from(entries));
        }
    }
    Ok(dict)
}

/// Figment errors name the key; make them name the environment variable too, and never
/// echo the offending value (it may be a secret).
fn describe(error: figment::Error) -> String {
    error
        .into_iter()
        .map(|e| {
            let path = e.path.join(".");
            let kind = match &e.kind {
                figment::error::Kind::MissingField(field) => {
                    return format!("missing {} (set {})", field, field.to_ascii_uppercase());
                }
                figment::error::Kind::InvalidType(_, expected) => format!("expected {expected}"),
                figment::error::Kind::InvalidValue(_, expected) => format!("expected {expected}"),
                figment::error::Kind::UnknownVariant(_, expected) => {
                    format!("expected one of {expected:?}")
                }
                other => other.to_string(),
            };
            format!("{} ({}): {kind}", path, path.to_ascii_uppercase())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Config {
    /// Checks that do not depend on the environment: values that parse but cannot work.
    fn check_shape(&self) -> Result<(), ConfigError> {
        if self.db_pool_size == 0 {
            return Err(ConfigError::Invalid(
                "DB_POOL_SIZE must be at least 1".into(),
            ));
        }
        if self.expected_pods == 0 {
            return Err(ConfigError::Invalid(
                "EXPECTED_PODS must be at least 1".into(),
            ));
        }
        if self.body_limit_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "BODY_LIMIT_BYTES must be at least 1024".into(),
            ));
        }
        if self.inbox_max_attempts == 0 || self.inbox_sweep_batch < 1 {
            return Err(ConfigError::Invalid(
                "INBOX_MAX_ATTEMPTS and INBOX_SWEEP_BATCH must be at least 1".into(),
            ));
        }
        if self.inbound_text_max_bytes < 1024 || self.agent_prompt_max_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "INBOUND_TEXT_MAX_BYTES and AGENT_PROMPT_MAX_BYTES must be at least 1024".into(),
            ));
        }
        // The schema holds message text up to 1 MiB (migration client_text_limits).
        if self.inbound_text_max_bytes > 1_048_576 {
            return Err(ConfigError::Invalid(
                "INBOUND_TEXT_MAX_BYTES must be at most 1048576 (1 MiB)".into(),
            ));
        }
        if self.http_header_timeout_ms == 0
            || self.http_body_timeout_ms == 0
            || self.http_request_timeout_ms == 0
        {
            return Err(ConfigError::Invalid(
                "HTTP_HEADER_TIMEOUT_MS, HTTP_BODY_TIMEOUT_MS and HTTP_REQUEST_TIMEOUT_MS must be positive".into(),
            ));
        }
        if let Some(key) = &self.master_encryption_key {
            crate::invariants::decode_master_key(key)
                .map_err(|m| ConfigError::Invalid(format!("MASTER_ENCRYPTION_KEY {m}")))?;
        }
        for name in self.schedules.keys() {
            if !crate::SCHEDULED_JOBS.contains(&name.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "schedules: unknown job {name} (known: {})",
                    crate::SCHEDULED_JOBS.join(", ")
                )));
            }
        }
        for (name, spec) in &self.rate_limits {
            let var = format!("RATE_LIMIT_{}", name.to_ascii_uppercase());
            if !crate::RATE_LIMIT_POLICIES.contains(&name.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "rate_limits: unknown policy {name}"
                )));
            }
            crate::parse_rate(spec).map_err(|m| ConfigError::Invalid(format!("{var} {m}")))?;
        }
        if self.scheduler_lease_ms < 300 {
            return Err(ConfigError::Invalid(
                "SCHEDULER_LEASE_MS must be at least 300".into(),
            ));
        }
        if self.db_max_connections == Some(0) {
            return Err(ConfigError::Invalid(
                "DB_MAX_CONNECTIONS must be at least 1".into(),
            ));
        }
        self.check_tls()?;
        if self.app_env != AppEnv::Production && self.redis_prefix.is_empty() {
            return Err(ConfigError::Invalid(
                "REDIS_PREFIX must not be empty".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn dir() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"))
    }

    const BASE: &[(&str, &str)] = &[
        ("DATABASE_URL", "postgres://app:pw@localhost/db"),
        ("JWT_SECRET", "short"),
    ];

    #[test]
    fn env_overrides_file_overrides_defaults() {
        let mut v = vars(BASE);
        v.insert("APP_ENV".into(), "test".into());
        v.insert("PORT".into(), "4123".into());
        let c = load_from(&v, &dir()).expect("loads");
        assert_eq!(c.port, 4123);
        assert_eq!(c.app_env, AppEnv::Test);
        // from config/test.toml
        assert_eq!(c.drain_delay_ms, 0);
        // from defaults
        assert_eq!(c.shutdown_budget_secs, 10);
        assert_eq!(c.jwt_ttl_secs, 86400);
    }

    #[test]
    fn unrelated_env_vars_are_ignored() {
        let mut v = vars(BASE);
        v.insert("HOST".into(), "some-hostname".into());
        v.insert("PATH".into(), "/usr/bin".into());
        assert!(load_from(&v, &dir()).is_ok());
    }

    #[test]
    fn numeric_looking_secrets_stay_strings() {
        let mut v = vars(BASE);
        v.insert("JWT_SECRET".into(), "1234567890".into());
        let c = load_from(&v, &dir()).expect("loads");
        assert_eq!(c.jwt_secret.expose_secret(), "1234567890");
    }

    #[test]
    fn secret_by_file_reference() {
        let path = std::env::temp_dir().join(format!("sb-secret-{}", std::process::id()));
        std::fs::write(&path, "from-a-file\n").expect("write");
        let mut v = vars(BASE);
        v.insert("JWT_SECRET_FILE".into(), path.display().to_string());
        let c = load_from(&v, &dir()).expect("loads");
        assert_eq!(c.jwt_secret.expose_secret(), "from-a-file");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let mut v = vars(BASE);
        v.insert("JWT_SECRET".into(), "super-secret-jwt-value".into());
        let c = load_from(&v, &dir()).expect("loads");
        let shown = format!("{c:?}");
        assert!(!shown.contains("super-secret-jwt-value"));
        assert!(!shown.contains("app:pw"));
    }

    #[test]
    fn bad_values_name_the_variable_not_the_value() {
        let mut v = vars(BASE);
        v.insert("PORT".into(), "not-a-port".into());
        let err = load_from(&v, &dir()).expect_err("rejects").to_string();
        assert!(err.contains("PORT"), "{err}");
        let missing = load_from(&vars(&[("JWT_SECRET", "x")]), &dir())
            .expect_err("rejects")
            .to_string();
        assert!(missing.contains("DATABASE_URL"), "{missing}");
    }

    #[test]
    fn malformed_master_key_is_rejected() {
        let mut v = vars(BASE);
        v.insert("MASTER_ENCRYPTION_KEY".into(), "too-short".into());
        let err = load_from(&v, &dir()).expect_err("rejects").to_string();
        assert!(err.contains("MASTER_ENCRYPTION_KEY"), "{err}");
        assert!(!err.contains("too-short"));
    }
}
