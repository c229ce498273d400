//! What a configuration must satisfy in every environment, checked once when it is loaded:
//! a value that parses but cannot work (a zero lease, a poll that would spin, a retry base
//! above its cap) refuses the start with exit code 2, naming its variable, instead of being
//! raised quietly where it is used. Every broken rule is reported at once. Production's own
//! rules (secrets, TLS, the connection budget) are in `production.rs`.

use crate::env::{self, Setting};
use crate::{AppEnv, Config, ConfigError};
use std::time::Duration;

/// A value as a rule's message shows it: a duration in its variable's unit.
trait Shown {
    fn shown(&self, setting: &Setting) -> String;
}

impl Shown for Duration {
    fn shown(&self, setting: &Setting) -> String {
        setting
            .unit()
            .map_or_else(|| format!("{self:?}"), |u| u.count(*self).to_string())
    }
}

macro_rules! shown_as_displayed {
    ($($t:ty),+) => {$(
        impl Shown for $t {
            fn shown(&self, _: &Setting) -> String {
                self.to_string()
            }
        }
    )+};
}
shown_as_displayed!(u32, i32, i64, usize);

/// The message of a broken bound on `config.section.key`, named by the declaration.
fn bound<T: Shown>(section: &str, key: &str, rule: &str, limit: &T, value: &T) -> String {
    let setting = env::find(section, key).expect("a declared setting");
    format!(
        "{} must be {rule} {} (it is {})",
        setting.var(),
        limit.shown(setting),
        value.shown(setting)
    )
}

/// `at_least!(broken, c.section.key, min)`: `c.section.key >= min`, or a line in `broken`.
macro_rules! at_least {
    ($broken:ident, $c:ident . $section:ident . $key:ident, $min:expr) => {
        if $c.$section.$key < $min {
            let key = (stringify!($section), stringify!($key));
            $broken.push(bound(key.0, key.1, "at least", &$min, &$c.$section.$key));
        }
    };
}

/// `at_most!(broken, c.section.key, max)`: `c.section.key <= max`, or a line in `broken`.
macro_rules! at_most {
    ($broken:ident, $c:ident . $section:ident . $key:ident, $max:expr) => {
        if $c.$section.$key > $max {
            let key = (stringify!($section), stringify!($key));
            $broken.push(bound(key.0, key.1, "at most", &$max, &$c.$section.$key));
        }
    };
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The lower and upper bounds of single settings.
fn bounds(c: &Config, broken: &mut Vec<String>) {
    // Counts of zero: no connection, no pod, no attempt, an empty batch, a breaker that
    // opens before the first failure.
    at_least!(broken, c.database.pool_size, 1);
    at_least!(broken, c.app.expected_pods, 1);
    at_least!(broken, c.inbox.max_attempts, 1);
    at_least!(broken, c.inbox.sweep_batch, 1);
    at_least!(broken, c.outbound.breaker_threshold, 1);
    if c.database.max_connections == Some(0) {
        broken.push(bound("database", "max_connections", "at least", &1u32, &0));
    }
    // Sizes below one small request or message.
    at_least!(broken, c.http.body_limit_bytes, 1024);
    at_least!(broken, c.inbox.text_max_bytes, 1024);
    at_least!(broken, c.agent.prompt_max_bytes, 1024);
    // The schema holds message text up to 1 MiB (migration client_text_limits).
    at_most!(broken, c.inbox.text_max_bytes, 1_048_576);
    // Timeouts of zero fail every call at once; a lease of zero lapses before its first
    // renewal (every third of it).
    at_least!(broken, c.http.header_timeout, ms(1));
    at_least!(broken, c.http.body_timeout, ms(1));
    at_least!(broken, c.http.request_timeout, ms(1));
    at_least!(broken, c.outbound.timeout, ms(1));
    at_least!(broken, c.outbound.breaker_cooldown, ms(1));
    at_least!(broken, c.agent.health_timeout, ms(1));
    at_least!(broken, c.rate_limit.redis_timeout, ms(1));
    at_least!(broken, c.inbox.lease, secs(1));
    at_least!(broken, c.outbox.lease, secs(1));
    at_least!(broken, c.privacy.erasure_lease, secs(1));
    at_least!(broken, c.privacy.retention_duty_percent, 1);
    at_most!(broken, c.privacy.retention_duty_percent, 100);
    at_least!(broken, c.scheduler.lease, ms(300));
    // Polls and slots that would spin.
    at_least!(broken, c.workers.queue_poll, ms(10));
    at_least!(broken, c.realtime.relay_poll, ms(10));
    at_least!(broken, c.realtime.watchdog_interval, ms(50));
    at_least!(broken, c.backpressure.sample_interval, ms(50));
    at_least!(broken, c.inbox.sweep_interval, ms(100));
    at_least!(broken, c.inbox.prune_interval, ms(100));
    at_least!(broken, c.outbox.sweep_interval, ms(100));
    at_least!(broken, c.outbound.dead_letter_interval, ms(100));
    // Windows: clients retry an `Idempotency-Key` within a day; an alert window or a run
    // history shorter than the jobs' own slots forgets what it is there to remember.
    at_least!(broken, c.http.idempotency_ttl, secs(24 * 3600));
    at_least!(broken, c.scheduler.history, secs(3600));
    // A slot's row is the lock that keeps it from running twice; the count keeps it long
    // after its pod could still claim it.
    at_least!(broken, c.scheduler.history_runs, 60);
    at_least!(broken, c.alerts.window, secs(1));
}

/// Rules between settings.
fn across(c: &Config, broken: &mut Vec<String>) {
    // The doubling is capped at the maximum: a base above it would make every wait the cap.
    if c.inbox.retry_base > c.inbox.retry_max {
        broken.push(format!(
            "INBOX_RETRY_BASE_SECS ({}) must not exceed INBOX_RETRY_MAX_SECS ({})",
            c.inbox.retry_base.as_secs(),
            c.inbox.retry_max.as_secs()
        ));
    }
    if c.app.env != AppEnv::Production && c.redis.prefix.is_empty() {
        broken.push("REDIS_PREFIX must not be empty".into());
    }
}

/// Values with a syntax of their own: the key lists and the rate limits.
fn syntax(c: &Config, broken: &mut Vec<String>) {
    crate::keys::check(c, broken);
    crate::traces::check(c, broken);
    for (name, spec) in &c.rate_limit.policies {
        if let Err(m) = crate::parse_rate(spec) {
            broken.push(format!("{} {m}", env::table_var("RATE_LIMIT_", name)));
        }
    }
}

impl Config {
    /// Every rule of this module; the TLS settings must agree too (`tls.rs`).
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let mut broken = Vec::new();
        bounds(self, &mut broken);
        across(self, &mut broken);
        syntax(self, &mut broken);
        if let Err(e) = self.system_mail() {
            broken.push(e.to_string());
        }
        match self.check_tls() {
            Ok(()) => {}
            Err(ConfigError::Invalid(m)) => broken.push(m),
            Err(other) => broken.push(other.to_string()),
        }
        if broken.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(broken.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;

    fn load(pairs: &[(&str, &str)]) -> Result<crate::Config, crate::ConfigError> {
        let mut vars: HashMap<String, String> = [
            ("DATABASE_URL", "postgres://localhost/db"),
            ("JWT_SECRET", "short"),
        ]
        .iter()
        .chain(pairs)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        vars.insert("APP_ENV".into(), "test".into());
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
        crate::load_from(&vars, &dir)
    }

    #[test]
    fn the_shipped_defaults_hold() {
        load(&[]).expect("loads");
    }

    #[test]
    fn each_bound_names_its_variable_in_its_unit() {
        let cases = [
            (
                "QUEUE_POLL_MS",
                "9",
                "QUEUE_POLL_MS must be at least 10 (it is 9)",
            ),
            (
                "INBOX_LEASE_SECS",
                "0",
                "INBOX_LEASE_SECS must be at least 1 (it is 0)",
            ),
            (
                "OUTBOX_LEASE_SECS",
                "0",
                "OUTBOX_LEASE_SECS must be at least 1",
            ),
            (
                "OUTBOUND_TIMEOUT_MS",
                "0",
                "OUTBOUND_TIMEOUT_MS must be at least 1",
            ),
            (
                "OUTBOUND_BREAKER_THRESHOLD",
                "0",
                "OUTBOUND_BREAKER_THRESHOLD must be at least 1",
            ),
            (
                "OUTBOUND_BREAKER_COOLDOWN_MS",
                "0",
                "OUTBOUND_BREAKER_COOLDOWN_MS must be at least 1",
            ),
            (
                "AGENT_HEALTH_TIMEOUT_MS",
                "0",
                "AGENT_HEALTH_TIMEOUT_MS must be at least 1",
            ),
            (
                "RATE_LIMIT_REDIS_TIMEOUT_MS",
                "0",
                "RATE_LIMIT_REDIS_TIMEOUT_MS must be at least 1",
            ),
            ("RELAY_POLL_MS", "5", "RELAY_POLL_MS must be at least 10"),
            (
                "REALTIME_WATCHDOG_MS",
                "49",
                "REALTIME_WATCHDOG_MS must be at least 50",
            ),
            (
                "BACKPRESSURE_SAMPLE_MS",
                "10",
                "BACKPRESSURE_SAMPLE_MS must be at least 50",
            ),
            (
                "IDEMPOTENCY_TTL_HOURS",
                "12",
                "IDEMPOTENCY_TTL_HOURS must be at least 24 (it is 12)",
            ),
            (
                "SCHEDULER_HISTORY_HOURS",
                "0",
                "SCHEDULER_HISTORY_HOURS must be at least 1",
            ),
            (
                "SCHEDULER_HISTORY_RUNS",
                "59",
                "SCHEDULER_HISTORY_RUNS must be at least 60 (it is 59)",
            ),
            (
                "SCHEDULER_LEASE_MS",
                "299",
                "SCHEDULER_LEASE_MS must be at least 300",
            ),
            (
                "ALERT_WINDOW_SECS",
                "0",
                "ALERT_WINDOW_SECS must be at least 1",
            ),
            (
                "INBOX_SWEEP_INTERVAL_MS",
                "99",
                "INBOX_SWEEP_INTERVAL_MS must be at least 100",
            ),
            (
                "INBOX_PRUNE_INTERVAL_MS",
                "99",
                "INBOX_PRUNE_INTERVAL_MS must be at least 100",
            ),
            (
                "OUTBOX_SWEEP_INTERVAL_MS",
                "99",
                "OUTBOX_SWEEP_INTERVAL_MS must be at least 100",
            ),
            (
                "DEAD_LETTER_INTERVAL_MS",
                "99",
                "DEAD_LETTER_INTERVAL_MS must be at least 100",
            ),
            ("DB_POOL_SIZE", "0", "DB_POOL_SIZE must be at least 1"),
            (
                "DB_MAX_CONNECTIONS",
                "0",
                "DB_MAX_CONNECTIONS must be at least 1",
            ),
            ("EXPECTED_PODS", "0", "EXPECTED_PODS must be at least 1"),
            (
                "INBOX_MAX_ATTEMPTS",
                "0",
                "INBOX_MAX_ATTEMPTS must be at least 1",
            ),
            (
                "INBOX_MAX_ATTEMPTS",
                "2147483648",
                "(INBOX_MAX_ATTEMPTS): expected i32",
            ),
            (
                "INBOX_SWEEP_BATCH",
                "0",
                "INBOX_SWEEP_BATCH must be at least 1",
            ),
            (
                "BODY_LIMIT_BYTES",
                "1023",
                "BODY_LIMIT_BYTES must be at least 1024",
            ),
            (
                "INBOUND_TEXT_MAX_BYTES",
                "2000000",
                "INBOUND_TEXT_MAX_BYTES must be at most 1048576",
            ),
            (
                "AGENT_PROMPT_MAX_BYTES",
                "10",
                "AGENT_PROMPT_MAX_BYTES must be at least 1024",
            ),
            (
                "HTTP_HEADER_TIMEOUT_MS",
                "0",
                "HTTP_HEADER_TIMEOUT_MS must be at least 1",
            ),
            (
                "HTTP_BODY_TIMEOUT_MS",
                "0",
                "HTTP_BODY_TIMEOUT_MS must be at least 1",
            ),
            (
                "HTTP_REQUEST_TIMEOUT_MS",
                "0",
                "HTTP_REQUEST_TIMEOUT_MS must be at least 1",
            ),
        ];
        for (var, value, expected) in cases {
            let err = load(&[(var, value)]).expect_err(var).to_string();
            assert!(err.contains(expected), "{var}={value}: {err}");
        }
    }

    #[test]
    fn zero_stays_off_where_it_means_off() {
        let c = load(&[
            ("WORKER_CONCURRENCY", "0"),
            ("MAX_IN_FLIGHT", "0"),
            ("ACCEPT_PRIORITY_IN_FLIGHT", "0"),
            ("BACKPRESSURE_INBOUND_DEPTH", "0"),
            ("BACKPRESSURE_OUTBOUND_DEPTH", "0"),
            ("SOCKETS_PER_USER", "0"),
            ("SOCKETS_PER_ADDRESS", "0"),
            ("DRAIN_DELAY_MS", "0"),
            ("INBOX_RETRY_BASE_SECS", "0"),
            ("PORT", "0"),
        ]);
        c.expect("loads");
    }

    #[test]
    fn the_retry_base_stays_below_its_cap() {
        let err = load(&[
            ("INBOX_RETRY_BASE_SECS", "7200"),
            ("INBOX_RETRY_MAX_SECS", "3600"),
        ])
        .expect_err("rejects")
        .to_string();
        assert!(
            err.contains(
                "INBOX_RETRY_BASE_SECS (7200) must not exceed INBOX_RETRY_MAX_SECS (3600)"
            ),
            "{err}"
        );
    }

    #[test]
    fn every_broken_rule_is_reported_at_once() {
        let err = load(&[("QUEUE_POLL_MS", "1"), ("OUTBOX_LEASE_SECS", "0")])
            .expect_err("rejects")
            .to_string();
        assert!(
            err.contains("QUEUE_POLL_MS") && err.contains("OUTBOX_LEASE_SECS"),
            "{err}"
        );
    }

    #[test]
    fn malformed_rates_name_their_variable() {
        let err = load(&[("RATE_LIMIT_LOGIN_IP", "lots")])
            .expect_err("rejects")
            .to_string();
        assert!(err.contains("RATE_LIMIT_LOGIN_IP must be"), "{err}");
    }
}
