//! Production start-up invariants (SPEC §6, AA9). Each violation is reported on its own line
//! and the process refuses to start before it binds the port. The rules that hold in every
//! environment (bounds, cross-field rules) are in `invariants.rs`, checked at load.

use crate::{AppEnv, Config};
use std::fmt;
use url::{Host, Url};

/// Minimum length of `JWT_SECRET` in production.
pub const MIN_JWT_SECRET_LEN: usize = 64;

/// Share of Postgres `max_connections` that all pods together may use (AA9).
pub const CONNECTION_BUDGET_SHARE: f64 = 0.8;

/// One broken production invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// `DEMO_MODE` is on.
    DemoMode,
    /// `FAULT_INJECT` is set.
    FaultInjection,
    /// `JWT_SECRET` is shorter than [`MIN_JWT_SECRET_LEN`].
    WeakJwtSecret {
        /// Its actual length.
        len: usize,
    },
    /// An entry of `JWT_SECRETS` is shorter than [`MIN_JWT_SECRET_LEN`].
    WeakJwtSecrets {
        /// Its position in the list, from 1.
        entry: usize,
        /// Its actual length.
        len: usize,
    },
    /// Neither `MASTER_ENCRYPTION_KEY` nor `MASTER_ENCRYPTION_KEYS` is set.
    NoMasterKey,
    /// `SENTRY_DSN` is missing.
    NoSentryDsn,
    /// `REDIS_URL` is missing.
    NoRedis,
    /// `PUBLIC_BASE_URL` is not https, or names this machine: providers could not deliver
    /// webhooks to it, and Twilio signatures built from it would never match.
    PublicBaseUrl {
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A Postgres or Redis connection in production that may be plaintext or unverified
    /// without having been asked for.
    WeakTls {
        /// The variable that says it explicitly.
        setting: &'static str,
        /// What the configuration does instead.
        problem: &'static str,
    },
    /// pool × pods exceeds `DB_MAX_CONNECTIONS`, the service's declared budget (behind a
    /// pooler, where the server's own `max_connections` says nothing about it).
    DeclaredBudget {
        /// `DB_POOL_SIZE`.
        pool: u32,
        /// `EXPECTED_PODS`.
        pods: u32,
        /// `DB_MAX_CONNECTIONS`.
        max: u32,
    },
    /// System mail over SMTP without TLS to a server that is not this machine: the mail and
    /// the SMTP password would cross the network in clear.
    PlaintextSmtp,
    /// pool × pods exceeds 80 % of Postgres `max_connections`.
    ConnectionBudget {
        /// `DB_POOL_SIZE`.
        pool: u32,
        /// `EXPECTED_PODS`.
        pods: u32,
        /// The server's `max_connections`.
        max_connections: u32,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::DemoMode => write!(f, "DEMO_MODE must be off in production"),
            Violation::FaultInjection => write!(f, "FAULT_INJECT must not be set in production"),
            Violation::WeakJwtSecret { len } => write!(
                f,
                "JWT_SECRET must be at least {MIN_JWT_SECRET_LEN} characters in production (it has {len})"
            ),
            Violation::WeakJwtSecrets { entry, len } => write!(
                f,
                "JWT_SECRETS entry {entry} must be at least {MIN_JWT_SECRET_LEN} characters in production (it has {len})"
            ),
            Violation::NoMasterKey => {
                write!(
                    f,
                    "MASTER_ENCRYPTION_KEY must be set in production (or MASTER_ENCRYPTION_KEYS)"
                )
            }
            Violation::NoSentryDsn => write!(f, "SENTRY_DSN must be set in production"),
            Violation::NoRedis => write!(
                f,
                "REDIS_URL or REDIS_CLUSTER_NODES must be set in production, or REDIS_SENTINELS (there is no in-memory fallback)"
            ),
            Violation::PublicBaseUrl { problem } => write!(
                f,
                "PUBLIC_BASE_URL must be the https address providers reach in production ({problem})"
            ),
            Violation::WeakTls { setting, problem } => write!(
                f,
                "{problem}: in production set {setting}=verify, or {setting}=require / {setting}=off explicitly"
            ),
            Violation::PlaintextSmtp => write!(
                f,
                "MAIL_SMTP_URL must use TLS in production (smtp:// with STARTTLS, or smtps://); tls=off is only for a mail server on this machine"
            ),
            Violation::DeclaredBudget { pool, pods, max } => write!(
                f,
                "connection budget exceeded: DB_POOL_SIZE {pool} x EXPECTED_PODS {pods} = {} > DB_MAX_CONNECTIONS {max}",
                u64::from(*pool) * u64::from(*pods),
            ),
            Violation::ConnectionBudget {
                pool,
                pods,
                max_connections,
            } => write!(
                f,
                "connection budget exceeded: DB_POOL_SIZE {pool} x EXPECTED_PODS {pods} = {} > 80% of Postgres max_connections {max_connections} ({})",
                u64::from(*pool) * u64::from(*pods),
                budget(*max_connections)
            ),
        }
    }
}

/// Why `url` cannot be the address providers call, if it cannot: plain http (webhooks and
/// their signatures would cross the internet in clear), or a host that is this machine.
fn public_url_problem(url: &Url) -> Option<&'static str> {
    if url.scheme() != "https" {
        return Some("it is not https");
    }
    let local = url.host().is_none_or(|host| is_this_machine(&host));
    local.then_some("it points at localhost")
}

/// Whether `host` is this machine: `localhost`, `*.localhost`, a loopback or unspecified
/// address.
pub(crate) fn is_this_machine<S: AsRef<str>>(host: &Host<S>) -> bool {
    match host {
        Host::Domain(name) => {
            let name = name.as_ref().trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        Host::Ipv4(ip) => ip.is_loopback() || ip.is_unspecified(),
        Host::Ipv6(ip) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

fn budget(max_connections: u32) -> u64 {
    (f64::from(max_connections) * CONNECTION_BUDGET_SHARE).floor() as u64
}

impl Config {
    /// Invariants that can be checked from the configuration alone. Empty outside production.
    pub fn static_violations(&self) -> Vec<Violation> {
        if self.app.env != AppEnv::Production {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.app.demo_mode {
            out.push(Violation::DemoMode);
        }
        if self.app.fault_inject.is_some() {
            out.push(Violation::FaultInjection);
        }
        out.extend(self.weak_jwt_secrets());
        if self.master_keys().is_empty() {
            out.push(Violation::NoMasterKey);
        }
        if self.telemetry.sentry_dsn.is_none() {
            out.push(Violation::NoSentryDsn);
        }
        if self.redis.url.is_none()
            && self.redis.cluster_nodes.is_none()
            && self.redis.sentinels.is_none()
        {
            out.push(Violation::NoRedis);
        }
        if let Some(problem) = public_url_problem(&self.http.public_base_url) {
            out.push(Violation::PublicBaseUrl { problem });
        }
        out.extend(self.plaintext_problem());
        if self
            .system_mail()
            .ok()
            .flatten()
            .is_some_and(|m| m.plaintext_beyond_this_machine())
        {
            out.push(Violation::PlaintextSmtp);
        }
        out
    }

    /// The AA9 connection budget against the server's `max_connections`. Checked in every
    /// environment, since an exhausted server fails the same way everywhere; only production
    /// refuses to start on it.
    pub fn connection_budget_violation(&self, max_connections: u32) -> Option<Violation> {
        let wanted = u64::from(self.database.pool_size) * u64::from(self.app.expected_pods);
        (wanted > budget(max_connections)).then_some(Violation::ConnectionBudget {
            pool: self.database.pool_size,
            pods: self.app.expected_pods,
            max_connections,
        })
    }

    /// The AA9 budget against `DB_MAX_CONNECTIONS`, when it is set: the whole of it is the
    /// service's (a pooler reserves nothing else out of it). `None` when it is unset or holds.
    pub fn declared_budget_violation(&self) -> Option<Violation> {
        let max = self.database.max_connections?;
        let wanted = u64::from(self.database.pool_size) * u64::from(self.app.expected_pods);
        (wanted > u64::from(max)).then_some(Violation::DeclaredBudget {
            pool: self.database.pool_size,
            pods: self.app.expected_pods,
            max,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;

    const STRONG: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    fn production(overrides: &[(&str, Option<&str>)]) -> Config {
        let mut vars: HashMap<String, String> = [
            ("APP_ENV", "production"),
            ("DATABASE_URL", "postgres://localhost/db"),
            ("REDIS_URL", "rediss://localhost"),
            ("JWT_SECRET", STRONG),
            ("MASTER_ENCRYPTION_KEY", KEY),
            ("SENTRY_DSN", "https://key@sentry.example/1"),
            ("PUBLIC_BASE_URL", "https://switchboard.example.com"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        for (k, v) in overrides {
            match v {
                Some(v) => vars.insert((*k).to_owned(), (*v).to_owned()),
                None => vars.remove(*k),
            };
        }
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
        crate::load_from(&vars, &dir).expect("loads")
    }

    #[test]
    fn a_complete_production_config_passes() {
        let c = production(&[]);
        assert!(c.static_violations().is_empty());
        assert_eq!(c.connection_budget_violation(100), None);
        assert!(c.master_key_bytes().is_some());
    }

    #[test]
    fn each_invariant_is_reported() {
        type Overrides<'a> = &'a [(&'a str, Option<&'a str>)];
        let cases: &[(Overrides, Violation)] = &[
            (&[("DEMO_MODE", Some("true"))], Violation::DemoMode),
            (
                &[("JWT_SECRET", Some("short"))],
                Violation::WeakJwtSecret { len: 5 },
            ),
            (&[("MASTER_ENCRYPTION_KEY", None)], Violation::NoMasterKey),
            (&[("SENTRY_DSN", None)], Violation::NoSentryDsn),
            (&[("REDIS_URL", None)], Violation::NoRedis),
        ];
        for (overrides, expected) in cases {
            let v = production(overrides).static_violations();
            assert_eq!(v, vec![expected.clone()], "{overrides:?}");
        }
    }

    #[test]
    fn production_wants_a_public_https_base_url() {
        let refused = [
            ("http://switchboard.example.com", "it is not https"),
            ("https://localhost:8080", "it points at localhost"),
            ("https://LOCALHOST.", "it points at localhost"),
            ("https://api.localhost", "it points at localhost"),
            ("https://127.0.0.2", "it points at localhost"),
            ("https://[::1]:8443", "it points at localhost"),
            ("https://0.0.0.0", "it points at localhost"),
        ];
        for (url, problem) in refused {
            let v = production(&[("PUBLIC_BASE_URL", Some(url))]).static_violations();
            assert_eq!(v, vec![Violation::PublicBaseUrl { problem }], "{url}");
            assert!(v[0].to_string().starts_with("PUBLIC_BASE_URL must be"));
        }
        for url in [
            "https://switchboard.example.com",
            "https://10.0.0.5:8443/sb",
        ] {
            let c = production(&[("PUBLIC_BASE_URL", Some(url))]);
            assert!(c.static_violations().is_empty(), "{url}");
        }
        // Only production refuses it: the local stack runs on http://localhost.
        let dev = production(&[
            ("APP_ENV", Some("development")),
            ("PUBLIC_BASE_URL", Some("http://localhost:8080")),
        ]);
        assert!(dev.static_violations().is_empty());
    }

    #[test]
    fn connection_budget_is_80_percent() {
        let c = production(&[("DB_POOL_SIZE", Some("40")), ("EXPECTED_PODS", Some("2"))]);
        assert_eq!(c.connection_budget_violation(100), None);
        let v = c.connection_budget_violation(99).expect("80 > 79");
        assert!(v.to_string().contains("max_connections 99"));
    }

    #[test]
    fn a_declared_budget_replaces_the_servers() {
        let c = production(&[
            ("DB_POOL_SIZE", Some("40")),
            ("EXPECTED_PODS", Some("3")),
            ("DB_MAX_CONNECTIONS", Some("100")),
        ]);
        let v = c.declared_budget_violation().expect("120 > 100");
        assert!(v.to_string().contains("DB_MAX_CONNECTIONS 100"), "{v}");
        let fits = production(&[
            ("DB_POOL_SIZE", Some("40")),
            ("DB_MAX_CONNECTIONS", Some("80")),
        ]);
        assert_eq!(fits.declared_budget_violation(), None);
        assert_eq!(production(&[]).declared_budget_violation(), None);
    }

    #[test]
    fn production_wants_tls_asked_for() {
        let v = production(&[("REDIS_URL", Some("redis://cache"))]).static_violations();
        assert!(
            matches!(
                v.as_slice(),
                [Violation::WeakTls {
                    setting: "REDIS_TLS",
                    ..
                }]
            ),
            "{v:?}"
        );
        let ok = production(&[
            ("REDIS_URL", Some("redis://cache")),
            ("REDIS_TLS", Some("off")),
        ]);
        assert!(ok.static_violations().is_empty());
    }

    #[test]
    fn not_enforced_outside_production() {
        let c = production(&[
            ("APP_ENV", Some("development")),
            ("DEMO_MODE", Some("true")),
        ]);
        assert!(c.static_violations().is_empty());
    }

    #[test]
    fn hex_master_key_accepted() {
        let c = production(&[("MASTER_ENCRYPTION_KEY", Some(STRONG))]);
        assert_eq!(c.master_key_bytes().map(|k| k[1]), Some(0x23));
    }
}
