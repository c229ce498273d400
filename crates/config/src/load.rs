//! Building a [`Config`] from the three layers and validating it once.
//!
//! Every layer is first put in the structs' shape and checked against the declared settings
//! (`env.rs`): the environment by each setting's variable, the TOML files by their
//! `[section] key`. A key no setting has refuses the start, so a typo or a key from an older
//! layout is never ignored quietly.

use crate::Config;
use crate::env;
use crate::sections::SETTINGS;
use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Value};
use figment::{Figment, Provider};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const DEFAULTS: &str = include_str!("../../../config/default.toml");

/// Why configuration could not be loaded. Messages never contain secret values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A layer could not be read, or a value is missing, has the wrong type or breaks a
    /// rule; every broken rule is named, one per `;`.
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
    let env = env_layer(vars)?;
    let defaults = file_layer("config/default.toml", Toml::string(DEFAULTS))?;
    let app_env = [&env, &defaults]
        .into_iter()
        .find_map(|layer| {
            layer
                .get("app")
                .and_then(Value::as_dict)
                .and_then(|app| app.get("env"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let env_file = config_dir.join(format!("{app_env}.toml"));
    let file = file_layer(&env_file.display().to_string(), Toml::file(&env_file))?;
    let config: Config = Figment::from(Serialized::defaults(sections()))
        .merge(Serialized::defaults(defaults))
        .merge(Serialized::defaults(file))
        .merge(Serialized::defaults(env))
        .extract()
        .map_err(|e| ConfigError::Invalid(describe(e)))?;
    config.check()?;
    Ok(config)
}

/// Every section, empty: a section nothing sets is still there to report its missing keys.
fn sections() -> Dict {
    SETTINGS
        .iter()
        .map(|s| (s.section.to_owned(), Value::from(Dict::new())))
        .collect()
}

/// Puts `value` at `[section] key`.
fn insert(layer: &mut Dict, section: &str, key: &str, value: Value) {
    let entry = layer
        .entry(section.to_owned())
        .or_insert_with(|| Value::from(Dict::new()));
    if let Value::Dict(_, dict) = entry {
        dict.insert(key.to_owned(), value);
    }
}

/// The environment layer: the declared variables only (so `HOST`, `PATH` and friends never
/// leak in), with `{NAME}_FILE` references resolved.
fn env_layer(vars: &HashMap<String, String>) -> Result<Dict, ConfigError> {
    let mut layer = Dict::new();
    for setting in SETTINGS {
        if let Some(value) = setting.env_value(vars)? {
            insert(&mut layer, setting.section, setting.key, value);
        }
    }
    Ok(layer)
}

/// A TOML layer (`origin` names it in errors), every key a declared setting.
fn file_layer(origin: &str, toml: impl Provider) -> Result<Dict, ConfigError> {
    let invalid = |m: String| ConfigError::Invalid(format!("{origin}: {m}"));
    let raw: Dict = Figment::from(toml)
        .extract()
        .map_err(|e| invalid(e.to_string()))?;
    let mut layer = Dict::new();
    for (section, entries) in raw {
        if !SETTINGS.iter().any(|s| s.section == section) {
            return Err(invalid(unknown_section(&section)));
        }
        let Some(entries) = entries.into_dict() else {
            return Err(invalid(format!("[{section}] must be a table")));
        };
        for (key, value) in entries {
            let setting =
                env::find(&section, &key).ok_or_else(|| invalid(unknown_key(&section, &key)))?;
            let value = setting
                .file_value(value)
                .map_err(|m| invalid(format!("[{section}] {key} ({}): {m}", setting.var())))?;
            insert(&mut layer, &section, &key, value);
        }
    }
    Ok(layer)
}

/// Why a key of a section is refused. A key spelled like a variable of the section (the
/// variable's name is not always the key's, `TWILIO_API_BASE` sets `whatsapp_api_base`) is
/// told the key that setting has.
fn unknown_key(section: &str, key: &str) -> String {
    let same_variable = SETTINGS
        .iter()
        .find(|s| s.section == section && s.var().eq_ignore_ascii_case(key));
    match same_variable {
        Some(s) => format!(
            "unknown key {key} in [{section}] (the key {} sets is `{}`)",
            s.var(),
            s.key
        ),
        None => format!("unknown key {key} in [{section}]"),
    }
}

/// Why a top-level TOML key is refused. A flat key of the layout before sections
/// (`drain_delay_ms`) is told where its setting is now.
fn unknown_section(name: &str) -> String {
    if let Some(s) = SETTINGS.iter().find(|s| s.var().eq_ignore_ascii_case(name)) {
        let how = match s.unit() {
            Some(_) => ", a duration with its unit such as \"30s\"",
            None => "",
        };
        return format!("{name} is now `{}` in [{}]{how}", s.key, s.section);
    }
    let mut sections: Vec<&str> = SETTINGS.iter().map(|s| s.section).collect();
    sections.dedup();
    format!(
        "unknown key {name} (the sections are {})",
        sections.join(", ")
    )
}

/// Figment errors name the key; make them name the environment variable too, and never
/// echo the offending value (it may be a secret).
fn describe(error: figment::Error) -> String {
    error
        .into_iter()
        .map(|e| {
            let mut path = e.path.clone();
            let kind = match &e.kind {
                figment::error::Kind::MissingField(field) => {
                    path.push(field.to_string());
                    let var = env::var_at(&path).unwrap_or_else(|| path.join("."));
                    return format!("missing {} (set {var})", path.join("."));
                }
                figment::error::Kind::InvalidType(_, expected) => format!("expected {expected}"),
                figment::error::Kind::InvalidValue(_, expected) => format!("expected {expected}"),
                figment::error::Kind::UnknownVariant(_, expected) => {
                    format!("expected one of {expected:?}")
                }
                other => other.to_string(),
            };
            let var = env::var_at(&path).unwrap_or_else(|| path.join(".").to_ascii_uppercase());
            format!("{} ({var}): {kind}", path.join("."))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AppEnv;
    use secrecy::ExposeSecret;
    use std::time::Duration;

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
        assert_eq!(c.http.port, 4123);
        assert_eq!(c.app.env, AppEnv::Test);
        // from config/test.toml
        assert_eq!(c.lifecycle.drain_delay, Duration::ZERO);
        assert_eq!(c.lifecycle.shutdown_budget, Duration::from_secs(10));
        assert_eq!(c.rate_limit("default"), "1000000/min");
        // from defaults, tables merged entry by entry
        assert_eq!(c.auth.jwt_ttl, Duration::from_secs(86400));
        assert_eq!(c.rate_limit("login_failures"), "10/15min");
    }

    #[test]
    fn every_channels_webhooks_have_a_limit_by_default() {
        let c = load_from(&vars(BASE), &dir()).expect("loads");
        for channel in switchboard_domain::ChannelKind::ALL {
            let policy = channel.webhook_policy();
            assert!(crate::RATE_LIMIT_POLICIES.contains(&policy), "{policy}");
            assert_ne!(c.rate_limit(policy), "off", "{policy} has no default");
        }
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
        assert_eq!(c.jwt_secrets()[0].expose_secret(), "1234567890");
    }

    #[test]
    fn secret_by_file_reference() {
        let path = std::env::temp_dir().join(format!("sb-secret-{}", std::process::id()));
        std::fs::write(&path, "from-a-file\n").expect("write");
        let mut v = vars(BASE);
        v.insert("JWT_SECRET_FILE".into(), path.display().to_string());
        let c = load_from(&v, &dir()).expect("loads");
        assert_eq!(c.jwt_secrets()[0].expose_secret(), "from-a-file");
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

    #[test]
    fn each_variable_keeps_its_unit() {
        let mut v = vars(BASE);
        for (var, n) in [
            ("OUTBOUND_TIMEOUT_MS", "7"),
            ("INBOX_GRACE_SECS", "7"),
            ("EVENTS_RETENTION_HOURS", "7"),
            ("INBOX_RETENTION_DAYS", "7"),
        ] {
            v.insert(var.into(), n.into());
        }
        let c = load_from(&v, &dir()).expect("loads");
        assert_eq!(c.outbound.timeout, Duration::from_millis(7));
        assert_eq!(c.inbox.grace, Duration::from_secs(7));
        assert_eq!(c.realtime.events_retention, Duration::from_secs(7 * 3600));
        assert_eq!(c.inbox.retention, Duration::from_secs(7 * 86_400));
        v.insert("INBOX_GRACE_SECS".into(), "30s".into());
        let err = load_from(&v, &dir()).expect_err("rejects").to_string();
        assert!(
            err.contains("INBOX_GRACE_SECS must be a whole number of seconds"),
            "{err}"
        );
    }

    #[test]
    fn tables_are_set_one_variable_per_entry() {
        let mut v = vars(BASE);
        v.insert("SCHEDULE_DAILY_SUMMARY".into(), "@every 5s".into());
        v.insert("RATE_LIMIT_LOGIN_IP".into(), "5/s".into());
        let c = load_from(&v, &dir()).expect("loads");
        assert_eq!(c.schedule("daily-summary").as_deref(), Some("@every 5s"));
        assert_eq!(
            c.schedule("weekly-report").as_deref(),
            Some("0 0 9 * * Mon")
        );
        assert_eq!(
            c.schedule("inbox-sweeper").as_deref(),
            Some("@every 15000ms")
        );
        assert_eq!(c.rate_limit("login_ip"), "5/s");
        assert_eq!(c.rate_limit("default"), "1200/min");
    }

    /// A config directory holding `development.toml` with `text`.
    fn with_file(text: &str) -> PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sb-config-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("development.toml"), text).expect("write");
        dir
    }

    #[test]
    fn a_file_sets_durations_with_their_unit() {
        let dir = with_file("[inbox]\ngrace = \"2min\"\n[lifecycle]\ndrain_delay = \"250ms\"\n");
        let c = load_from(&vars(BASE), &dir).expect("loads");
        assert_eq!(c.inbox.grace, Duration::from_secs(120));
        assert_eq!(c.lifecycle.drain_delay, Duration::from_millis(250));
        let dir = with_file("[inbox]\ngrace = 30\n");
        let err = load_from(&vars(BASE), &dir)
            .expect_err("rejects")
            .to_string();
        assert!(
            err.contains("INBOX_GRACE_SECS") && err.contains("\"30s\""),
            "{err}"
        );
    }

    #[test]
    fn unknown_file_keys_refuse_the_start() {
        let dir = with_file("[inbox]\ngrace_secs = \"30s\"\n");
        let err = load_from(&vars(BASE), &dir)
            .expect_err("rejects")
            .to_string();
        assert!(err.contains("unknown key grace_secs in [inbox]"), "{err}");
        // A key spelled like its variable is told the setting's key.
        let dir = with_file("[app]\napp_env = \"test\"\n");
        let err = load_from(&vars(BASE), &dir)
            .expect_err("rejects")
            .to_string();
        assert!(
            err.contains("unknown key app_env in [app] (the key APP_ENV sets is `env`)"),
            "{err}"
        );
        // A flat key from before the sections says where its setting is now.
        let dir = with_file("drain_delay_ms = 1000\n");
        let err = load_from(&vars(BASE), &dir)
            .expect_err("rejects")
            .to_string();
        assert!(
            err.contains("drain_delay_ms is now `drain_delay` in [lifecycle]"),
            "{err}"
        );
        let dir = with_file("[scheduler.schedules]\nnightly = \"0 0 3 * * *\"\n");
        let err = load_from(&vars(BASE), &dir)
            .expect_err("rejects")
            .to_string();
        assert!(err.contains("unknown entry nightly"), "{err}");
    }
}
