//! How the pod reaches Postgres and Redis on managed services: TLS, and whether a
//! transaction-mode pooler (RDS Proxy, PgBouncer) sits in front of Postgres (SPEC §10).
//!
//! A TLS setting can come from two places, `DATABASE_TLS` / `REDIS_TLS` and the URL itself
//! (`sslmode=…`, `rediss://…#insecure`). Both are honoured; when they disagree the pod
//! refuses to start rather than pick one silently. In production, a connection that is not
//! verified (or not encrypted) must be asked for explicitly: unset means `verify`.

use crate::{AppEnv, Config, ConfigError};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;
use url::Url;

/// `DATABASE_TLS` / `REDIS_TLS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Encrypted, and the server's certificate checked against the system roots plus the
    /// `_TLS_CA` bundle, host name included (Postgres `verify-full`).
    Verify,
    /// Encrypted, certificate not checked: allowed only when set explicitly.
    Require,
    /// Plaintext: allowed only when set explicitly (a private network, the local stack).
    Off,
}

impl TlsMode {
    fn as_str(self) -> &'static str {
        match self {
            TlsMode::Verify => "verify",
            TlsMode::Require => "require",
            TlsMode::Off => "off",
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `DATABASE_POOLER`: what sits between the pods and Postgres.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolerMode {
    /// Postgres itself, or a pooler that keeps one server connection per client session:
    /// named prepared statements are cached per connection.
    #[default]
    Session,
    /// A transaction-mode pooler (RDS Proxy, PgBouncer `pool_mode = transaction`): a
    /// client may get another server connection after every transaction, so no statement
    /// is named and nothing outlives a transaction.
    Transaction,
}

/// The TLS the pod's Postgres connections use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgTls {
    /// `DATABASE_URL`'s own `sslmode` (and `sslrootcert`), or the driver's default
    /// (`prefer`) outside production.
    FromUrl,
    /// `verify-full`, with `DATABASE_TLS_CA` added to the system roots when set.
    Verify {
        /// `DATABASE_TLS_CA`.
        ca: Option<PathBuf>,
    },
    /// Encrypted, unverified.
    Require,
    /// Plaintext.
    Off,
}

/// The TLS the pod's Redis connections use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTls {
    /// `redis://`.
    Off,
    /// `rediss://`, certificate and host name checked against the system roots plus
    /// `REDIS_TLS_CA` when set.
    Verify {
        /// `REDIS_TLS_CA`.
        ca: Option<PathBuf>,
    },
    /// `rediss://`, certificate not checked.
    Require,
}

/// Where the pod's Redis is: one server, a cluster's seed nodes, or the sentinels that name
/// the master, with their TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisEndpoint {
    /// `REDIS_URL` alone, the `REDIS_CLUSTER_NODES` seeds, or the `REDIS_SENTINELS`.
    pub urls: Vec<String>,
    /// What `urls` are.
    pub shape: RedisShape,
    /// The TLS every connection uses (to the sentinels and to the nodes they name alike).
    pub tls: RedisTls,
}

impl RedisEndpoint {
    /// Whether `urls` are a cluster's seeds.
    pub fn is_cluster(&self) -> bool {
        self.shape == RedisShape::Cluster
    }
}

/// How the pod's Redis is laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisShape {
    /// One server.
    Single,
    /// A Redis Cluster.
    Cluster,
    /// A master (and its replicas) watched by Redis Sentinel.
    Sentinel(SentinelSettings),
}

/// What the pod needs to find the master through the sentinels and to log in to both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelSettings {
    /// `REDIS_SENTINEL_MASTER`.
    pub master: String,
    /// `REDIS_SENTINEL_USERNAME` / `REDIS_SENTINEL_PASSWORD`, unless the sentinel URLs
    /// carry their own.
    pub sentinel_auth: RedisAuth,
    /// `REDIS_USERNAME` / `REDIS_PASSWORD`: the master's and replicas' login.
    pub node_auth: RedisAuth,
}

/// A Redis login: `AUTH [username] password`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RedisAuth {
    /// The ACL user (`default` when absent).
    pub username: Option<String>,
    /// The password.
    pub password: Option<String>,
}

impl std::fmt::Debug for RedisAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAuth")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// The non-empty, trimmed items of a comma-separated setting.
fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A `sslmode` value of a Postgres URL.
fn url_sslmode(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "sslmode" || k == "ssl-mode")
        .map(|(_, v)| v.to_ascii_lowercase())
}

/// Whether `DATABASE_TLS=mode` and the URL's `sslmode` say the same thing.
fn same_pg_mode(mode: TlsMode, sslmode: &str) -> bool {
    matches!(
        (mode, sslmode),
        (TlsMode::Verify, "verify-full")
            | (TlsMode::Require, "require")
            | (TlsMode::Off, "disable")
    )
}

impl Config {
    /// The Postgres TLS to use, or why the settings contradict each other.
    pub fn pg_tls(&self) -> Result<PgTls, ConfigError> {
        let sslmode = url_sslmode(self.database.url.expose_secret());
        if let Some(url) = &self.database.direct_url {
            if let (Some(a), Some(b)) = (&sslmode, url_sslmode(url.expose_secret())) {
                if *a != b {
                    return Err(ConfigError::Invalid(format!(
                        "DATABASE_URL has sslmode={a} but DATABASE_DIRECT_URL has sslmode={b}: use one TLS setting (DATABASE_TLS) for both"
                    )));
                }
            }
        }
        let tls = match (self.database.tls, sslmode.as_deref()) {
            (Some(mode), Some(url_mode)) if !same_pg_mode(mode, url_mode) => {
                return Err(ConfigError::Invalid(format!(
                    "DATABASE_TLS={mode} contradicts sslmode={url_mode} in DATABASE_URL: remove sslmode from the URL or change DATABASE_TLS"
                )));
            }
            (Some(TlsMode::Verify), _) => PgTls::Verify {
                ca: self.database.tls_ca.clone(),
            },
            (Some(TlsMode::Require), _) => PgTls::Require,
            (Some(TlsMode::Off), _) => PgTls::Off,
            (None, Some(_)) => PgTls::FromUrl,
            (None, None) if self.app.env == AppEnv::Production => PgTls::Verify {
                ca: self.database.tls_ca.clone(),
            },
            (None, None) => PgTls::FromUrl,
        };
        if let (Some(ca), PgTls::Verify { .. } | PgTls::FromUrl) = (&self.database.tls_ca, &tls) {
            if !ca.is_file() {
                return Err(ConfigError::Invalid(format!(
                    "DATABASE_TLS_CA names {}, which is not a readable file",
                    ca.display()
                )));
            }
        }
        Ok(tls)
    }

    /// The Redis TLS to use for `url` (`REDIS_URL`), or why the settings contradict each other.
    pub fn redis_tls(&self, url: &str) -> Result<RedisTls, ConfigError> {
        self.redis_tls_named(url, "REDIS_URL")
    }

    /// [`Config::redis_tls`] for a URL from the setting `name`, which errors name.
    fn redis_tls_named(&self, url: &str, name: &str) -> Result<RedisTls, ConfigError> {
        let parsed = Url::parse(url)
            .map_err(|_| ConfigError::Invalid(format!("{name} has a URL that does not parse")))?;
        let tls_url = match parsed.scheme() {
            "rediss" | "valkeys" => true,
            "redis" | "valkey" | "redis+unix" | "unix" => false,
            other => {
                return Err(ConfigError::Invalid(format!(
                    "{name} has scheme {other}: use redis:// or rediss://"
                )));
            }
        };
        let insecure_url = tls_url && parsed.fragment() == Some("insecure");
        let ca = self.redis.tls_ca.clone();
        let tls = match (self.redis.tls, tls_url, insecure_url) {
            (Some(TlsMode::Verify), true, false) | (None, true, false) => RedisTls::Verify { ca },
            (Some(TlsMode::Require), true, _) | (None, true, true) => RedisTls::Require,
            (Some(TlsMode::Off) | None, false, _) => RedisTls::Off,
            (Some(TlsMode::Verify), true, true) => {
                return Err(ConfigError::Invalid(format!(
                    "REDIS_TLS=verify contradicts #insecure in {name}: remove one"
                )));
            }
            (Some(mode), false, _) => {
                return Err(ConfigError::Invalid(format!(
                    "REDIS_TLS={mode} needs rediss:// in {name} (it is redis://)"
                )));
            }
            (Some(TlsMode::Off), true, _) => {
                return Err(ConfigError::Invalid(format!(
                    "REDIS_TLS=off contradicts the rediss:// {name}: use redis:// or another REDIS_TLS"
                )));
            }
        };
        if let (Some(ca), RedisTls::Verify { .. }) = (&self.redis.tls_ca, &tls) {
            if !ca.is_file() {
                return Err(ConfigError::Invalid(format!(
                    "REDIS_TLS_CA names {}, which is not a readable file",
                    ca.display()
                )));
            }
        }
        Ok(tls)
    }

    /// Where the pod's Redis is and the TLS its connections use: the sentinels when
    /// `REDIS_SENTINELS` is set, the cluster's seed nodes when `REDIS_CLUSTER_NODES` is
    /// (every address must agree on TLS), else `REDIS_URL`. `None` when none is set.
    pub fn redis_endpoint(&self) -> Result<Option<RedisEndpoint>, ConfigError> {
        self.redis_auth_only_with_sentinels()?;
        if let Some(sentinels) = &self.redis.sentinels {
            return self.sentinel_endpoint(sentinels.expose_secret()).map(Some);
        }
        if let Some(nodes) = &self.redis.cluster_nodes {
            let urls = split_list(nodes.expose_secret());
            let tls = self.one_redis_tls(&urls, "REDIS_CLUSTER_NODES", "seeds")?;
            return Ok(Some(RedisEndpoint {
                urls,
                shape: RedisShape::Cluster,
                tls,
            }));
        }
        match &self.redis.url {
            Some(url) => Ok(Some(RedisEndpoint {
                tls: self.redis_tls(url.expose_secret())?,
                urls: vec![url.expose_secret().to_owned()],
                shape: RedisShape::Single,
            })),
            None => Ok(None),
        }
    }

    /// The TLS of every URL of the list setting `name` (of `what`), which must agree.
    fn one_redis_tls(
        &self,
        urls: &[String],
        name: &str,
        what: &str,
    ) -> Result<RedisTls, ConfigError> {
        let Some(first) = urls.first() else {
            return Err(ConfigError::Invalid(format!(
                "{name} is set but names no node: give comma-separated redis:// or rediss:// URLs"
            )));
        };
        let tls = self.redis_tls_named(first, name)?;
        for url in &urls[1..] {
            if self.redis_tls_named(url, name)? != tls {
                return Err(ConfigError::Invalid(format!(
                    "{name} mixes redis:// and rediss:// {what}: use one scheme for every one"
                )));
            }
        }
        Ok(tls)
    }

    /// `REDIS_SENTINELS` and the settings that go with it.
    fn sentinel_endpoint(&self, sentinels: &str) -> Result<RedisEndpoint, ConfigError> {
        if self.redis.cluster_nodes.is_some() {
            return Err(ConfigError::Invalid(
                "REDIS_SENTINELS and REDIS_CLUSTER_NODES are both set: a Redis is either a cluster or watched by sentinels, set one".into(),
            ));
        }
        let Some(master) = self
            .redis
            .sentinel_master
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
        else {
            return Err(ConfigError::Invalid(
                "REDIS_SENTINELS is set but REDIS_SENTINEL_MASTER is not: set it to the name the sentinels monitor the master under".into(),
            ));
        };
        // A bare `host:port` takes the scheme REDIS_TLS asks for.
        let scheme = match self.redis.tls {
            Some(TlsMode::Verify | TlsMode::Require) => "rediss",
            Some(TlsMode::Off) | None => "redis",
        };
        let urls: Vec<String> = split_list(sentinels)
            .into_iter()
            .map(|a| {
                if a.contains("://") {
                    a
                } else {
                    format!("{scheme}://{a}")
                }
            })
            .collect();
        let tls = self.one_redis_tls(&urls, "REDIS_SENTINELS", "sentinels")?;
        let exposed = |s: &Option<SecretString>| s.as_ref().map(|p| p.expose_secret().to_owned());
        Ok(RedisEndpoint {
            urls,
            shape: RedisShape::Sentinel(SentinelSettings {
                master: master.to_owned(),
                sentinel_auth: RedisAuth {
                    username: self.redis.sentinel_username.clone(),
                    password: exposed(&self.redis.sentinel_password),
                },
                node_auth: RedisAuth {
                    username: self.redis.username.clone(),
                    password: exposed(&self.redis.password),
                },
            }),
            tls,
        })
    }

    /// The sentinel-only settings without `REDIS_SENTINELS` would be ignored: refused, so
    /// a password meant for a `REDIS_URL` goes in the URL instead.
    fn redis_auth_only_with_sentinels(&self) -> Result<(), ConfigError> {
        if self.redis.sentinels.is_some() {
            return Ok(());
        }
        let r = &self.redis;
        let set = [
            ("REDIS_SENTINEL_MASTER", r.sentinel_master.is_some()),
            ("REDIS_SENTINEL_USERNAME", r.sentinel_username.is_some()),
            ("REDIS_SENTINEL_PASSWORD", r.sentinel_password.is_some()),
            ("REDIS_USERNAME", r.username.is_some()),
            ("REDIS_PASSWORD", r.password.is_some()),
        ];
        match set.iter().find(|(_, on)| *on) {
            Some((name, _)) => Err(ConfigError::Invalid(format!(
                "{name} is only read with REDIS_SENTINELS, which is not set (with REDIS_URL or \
                 REDIS_CLUSTER_NODES the login goes in the URL: rediss://user:password@host:port)"
            ))),
            None => Ok(()),
        }
    }

    /// The URL for work that needs a whole session (migrations take a session lock):
    /// `DATABASE_DIRECT_URL`, else `DATABASE_URL`.
    pub fn database_direct_url(&self) -> &str {
        self.database
            .direct_url
            .as_ref()
            .unwrap_or(&self.database.url)
            .expose_secret()
    }

    /// Production's rule: a Postgres or Redis connection that is not verified was asked for
    /// explicitly. `None` when it holds (or outside production).
    pub(crate) fn plaintext_problem(&self) -> Option<crate::Violation> {
        if self.app.env != AppEnv::Production {
            return None;
        }
        let sslmode = url_sslmode(self.database.url.expose_secret());
        if self.database.tls.is_none() && matches!(sslmode.as_deref(), Some("allow" | "prefer")) {
            return Some(crate::Violation::WeakTls {
                setting: "DATABASE_TLS",
                problem: "sslmode=allow/prefer in DATABASE_URL may fall back to plaintext",
            });
        }
        let plain = |u: &str| Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "redis" | "valkey"));
        let sentinels_plain = self.redis_endpoint().ok().flatten().is_some_and(|e| {
            matches!(e.shape, RedisShape::Sentinel(_)) && e.urls.iter().any(|u| plain(u))
        });
        let problem = match &self.redis.cluster_nodes {
            _ if sentinels_plain => {
                Some("REDIS_SENTINELS has plaintext redis:// sentinels; use rediss://")
            }
            Some(nodes) => nodes
                .expose_secret()
                .split(',')
                .any(|u| plain(u.trim()))
                .then_some("REDIS_CLUSTER_NODES has plaintext redis:// seeds; use rediss://"),
            None => self
                .redis
                .url
                .as_ref()
                .is_some_and(|u| plain(u.expose_secret()))
                .then_some("REDIS_URL is plaintext redis://; use rediss://"),
        };
        match problem {
            Some(problem) if self.redis.tls.is_none() => Some(crate::Violation::WeakTls {
                setting: "REDIS_TLS",
                problem,
            }),
            _ => None,
        }
    }

    /// Checks that the TLS settings agree, so a contradiction stops the load.
    pub(crate) fn check_tls(&self) -> Result<(), ConfigError> {
        self.pg_tls()?;
        if let Some(url) = &self.redis.url {
            self.redis_tls(url.expose_secret())?;
        }
        self.redis_endpoint()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut vars: HashMap<String, String> = [
            ("DATABASE_URL", "postgres://app:pw@db.example/app"),
            ("JWT_SECRET", "x"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        for (k, v) in pairs {
            vars.insert((*k).to_owned(), (*v).to_owned());
        }
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
        crate::load_from(&vars, &dir)
    }

    fn ca_file() -> PathBuf {
        let path = std::env::temp_dir().join(format!("sb-ca-{}.pem", std::process::id()));
        std::fs::write(&path, "not checked here").expect("write");
        path
    }

    #[test]
    fn production_verifies_unless_told_otherwise() {
        let prod = config(&[("APP_ENV", "production")]).expect("loads");
        assert_eq!(prod.pg_tls().expect("ok"), PgTls::Verify { ca: None });
        let off = config(&[("APP_ENV", "production"), ("DATABASE_TLS", "off")]).expect("loads");
        assert_eq!(off.pg_tls().expect("ok"), PgTls::Off);
        let dev = config(&[]).expect("loads");
        assert_eq!(dev.pg_tls().expect("ok"), PgTls::FromUrl);
    }

    #[test]
    fn url_sslmode_is_honoured_and_contradictions_refused() {
        let url = "postgres://app:pw@db.example/app?sslmode=verify-full";
        let c = config(&[("DATABASE_URL", url), ("DATABASE_TLS", "verify")]).expect("loads");
        assert_eq!(c.pg_tls().expect("same"), PgTls::Verify { ca: None });
        let err = config(&[("DATABASE_URL", url), ("DATABASE_TLS", "off")])
            .expect_err("contradiction")
            .to_string();
        assert!(
            err.contains("DATABASE_TLS=off") && err.contains("sslmode=verify-full"),
            "{err}"
        );
        assert!(!err.contains("pw"), "{err}");
        let prefer = "postgres://app:pw@db.example/app?sslmode=prefer";
        let c = config(&[("APP_ENV", "production"), ("DATABASE_URL", prefer)]).expect("loads");
        let v = c
            .plaintext_problem()
            .expect("prefer in production")
            .to_string();
        assert!(v.contains("DATABASE_TLS=verify"), "{v}");
        let dev = config(&[("DATABASE_URL", prefer)]).expect("loads");
        assert_eq!(dev.plaintext_problem(), None);
    }

    #[test]
    fn a_missing_ca_file_names_the_setting() {
        let err = config(&[
            ("DATABASE_TLS", "verify"),
            ("DATABASE_TLS_CA", "/nonexistent/ca.pem"),
        ])
        .expect_err("missing")
        .to_string();
        assert!(err.contains("DATABASE_TLS_CA"), "{err}");
        let ca = ca_file();
        let c = config(&[
            ("DATABASE_TLS", "verify"),
            ("DATABASE_TLS_CA", ca.to_str().expect("utf-8")),
        ])
        .expect("loads");
        assert_eq!(
            c.pg_tls().expect("ok"),
            PgTls::Verify {
                ca: Some(ca.clone())
            }
        );
        let _ = std::fs::remove_file(ca);
    }

    #[test]
    fn redis_tls_follows_the_scheme_and_refuses_contradictions() {
        let c = config(&[("REDIS_URL", "rediss://cache.example:6379")]).expect("loads");
        assert_eq!(
            c.redis_tls("rediss://cache.example:6379").expect("ok"),
            RedisTls::Verify { ca: None }
        );
        let c = config(&[("REDIS_URL", "rediss://cache.example/#insecure")]).expect("loads");
        assert_eq!(
            c.redis_tls("rediss://cache.example/#insecure").expect("ok"),
            RedisTls::Require
        );
        for (url, mode, names) in [
            ("redis://cache.example", "verify", "rediss://"),
            ("rediss://cache.example", "off", "REDIS_TLS=off"),
            ("rediss://cache.example/#insecure", "verify", "#insecure"),
        ] {
            let err = config(&[("REDIS_URL", url), ("REDIS_TLS", mode)])
                .expect_err(url)
                .to_string();
            assert!(err.contains(names), "{url} {mode}: {err}");
        }
        let plain = config(&[
            ("APP_ENV", "production"),
            ("REDIS_URL", "redis://cache.example"),
        ])
        .expect("loads");
        let v = plain
            .plaintext_problem()
            .expect("plaintext in production")
            .to_string();
        assert!(v.contains("REDIS_TLS=off"), "{v}");
        let c = config(&[
            ("APP_ENV", "production"),
            ("REDIS_URL", "redis://cache.example"),
            ("REDIS_TLS", "off"),
        ])
        .expect("explicit off");
        assert_eq!(
            c.redis_tls("redis://cache.example").expect("ok"),
            RedisTls::Off
        );
        assert_eq!(c.plaintext_problem(), None);
    }

    #[test]
    fn the_direct_url_defaults_to_the_pooled_one() {
        let c = config(&[]).expect("loads");
        assert_eq!(c.database_direct_url(), "postgres://app:pw@db.example/app");
        let c = config(&[(
            "DATABASE_DIRECT_URL",
            "postgres://app:pw@direct.example/app",
        )])
        .expect("loads");
        assert_eq!(
            c.database_direct_url(),
            "postgres://app:pw@direct.example/app"
        );
        assert_eq!(c.database.pooler, PoolerMode::Session);
        let c = config(&[("DATABASE_POOLER", "transaction")]).expect("loads");
        assert_eq!(c.database.pooler, PoolerMode::Transaction);
    }

    #[test]
    fn sentinels_name_the_master_and_take_their_own_login() {
        let c = config(&[
            (
                "REDIS_SENTINELS",
                "s1.example:26379, rediss://s2.example:26379",
            ),
            ("REDIS_SENTINEL_MASTER", "switchboard"),
            ("REDIS_TLS", "verify"),
            ("REDIS_SENTINEL_PASSWORD", "sentinel-pw"),
            ("REDIS_USERNAME", "app"),
            ("REDIS_PASSWORD", "node-pw"),
        ])
        .expect("loads");
        let endpoint = c.redis_endpoint().expect("ok").expect("set");
        assert_eq!(
            endpoint.urls,
            ["rediss://s1.example:26379", "rediss://s2.example:26379"]
        );
        assert_eq!(endpoint.tls, RedisTls::Verify { ca: None });
        let RedisShape::Sentinel(settings) = &endpoint.shape else {
            panic!("not a sentinel endpoint: {endpoint:?}");
        };
        assert_eq!(settings.master, "switchboard");
        assert_eq!(
            settings.sentinel_auth.password.as_deref(),
            Some("sentinel-pw")
        );
        assert_eq!(settings.sentinel_auth.username, None);
        assert_eq!(settings.node_auth.username.as_deref(), Some("app"));
        assert_eq!(settings.node_auth.password.as_deref(), Some("node-pw"));
        // The passwords never show in a debug print.
        let shown = format!("{endpoint:?}");
        assert!(
            !shown.contains("sentinel-pw") && !shown.contains("node-pw"),
            "{shown}"
        );
        // Without REDIS_TLS a bare address is plaintext, and production refuses it.
        let plain = config(&[
            ("APP_ENV", "production"),
            ("REDIS_SENTINELS", "s1.example:26379"),
            ("REDIS_SENTINEL_MASTER", "switchboard"),
        ])
        .expect("loads");
        let endpoint = plain.redis_endpoint().expect("ok").expect("set");
        assert_eq!(endpoint.urls, ["redis://s1.example:26379"]);
        assert!(plain.plaintext_problem().is_some());
    }

    #[test]
    fn sentinel_settings_that_cannot_work_are_refused_by_name() {
        let refused = |pairs: &[(&str, &str)]| config(pairs).expect_err("refused").to_string();
        let no_master = refused(&[("REDIS_SENTINELS", "s1.example:26379")]);
        assert!(no_master.contains("REDIS_SENTINEL_MASTER"), "{no_master}");
        let both = refused(&[
            ("REDIS_SENTINELS", "s1.example:26379"),
            ("REDIS_SENTINEL_MASTER", "m"),
            ("REDIS_CLUSTER_NODES", "redis://n.example:6379"),
        ]);
        assert!(
            both.contains("REDIS_CLUSTER_NODES") && both.contains("REDIS_SENTINELS"),
            "{both}"
        );
        let mixed = refused(&[
            (
                "REDIS_SENTINELS",
                "redis://s1.example:26379,rediss://s2.example:26379",
            ),
            ("REDIS_SENTINEL_MASTER", "m"),
        ]);
        assert!(
            mixed.contains("REDIS_SENTINELS") && mixed.contains("one scheme"),
            "{mixed}"
        );
        let empty = refused(&[("REDIS_SENTINELS", " , "), ("REDIS_SENTINEL_MASTER", "m")]);
        assert!(empty.contains("names no node"), "{empty}");
        for alone in [
            "REDIS_SENTINEL_MASTER",
            "REDIS_PASSWORD",
            "REDIS_SENTINEL_PASSWORD",
        ] {
            let why = refused(&[("REDIS_URL", "redis://cache.example"), (alone, "x")]);
            assert!(
                why.contains(alone) && why.contains("only read with REDIS_SENTINELS"),
                "{why}"
            );
        }
    }

    #[test]
    fn cluster_nodes_replace_the_url_and_must_agree_on_tls() {
        let c = config(&[(
            "REDIS_CLUSTER_NODES",
            "rediss://:pw@node-a.example:6379, rediss://node-b.example:6379",
        )])
        .expect("loads");
        let endpoint = c.redis_endpoint().expect("ok").expect("set");
        assert!(endpoint.is_cluster());
        assert_eq!(endpoint.urls.len(), 2);
        assert_eq!(endpoint.tls, RedisTls::Verify { ca: None });
        // Without either, there is no endpoint; with only REDIS_URL, a single server.
        assert_eq!(
            config(&[]).expect("loads").redis_endpoint().expect("ok"),
            None
        );
        let single = config(&[("REDIS_URL", "redis://cache.example")]).expect("loads");
        let single = single.redis_endpoint().expect("ok").expect("set");
        assert!(!single.is_cluster());
        assert_eq!(single.tls, RedisTls::Off);

        let mixed = config(&[(
            "REDIS_CLUSTER_NODES",
            "rediss://node-a.example:6379,redis://node-b.example:6379",
        )])
        .expect_err("mixed schemes")
        .to_string();
        assert!(
            mixed.contains("REDIS_CLUSTER_NODES") && mixed.contains("one scheme"),
            "{mixed}"
        );
        assert!(!mixed.contains("pw"), "{mixed}");
        let empty = config(&[("REDIS_CLUSTER_NODES", " , ")])
            .expect_err("no node")
            .to_string();
        assert!(empty.contains("names no node"), "{empty}");
        let off = config(&[
            ("REDIS_CLUSTER_NODES", "rediss://node-a.example:6379"),
            ("REDIS_TLS", "off"),
        ])
        .expect_err("contradiction")
        .to_string();
        assert!(
            off.contains("REDIS_TLS=off") && off.contains("REDIS_CLUSTER_NODES"),
            "{off}"
        );

        // Production refuses plaintext cluster seeds as it refuses a plaintext REDIS_URL.
        let prod = config(&[
            ("APP_ENV", "production"),
            ("REDIS_CLUSTER_NODES", "redis://node-a.example:6379"),
        ])
        .expect("loads");
        assert!(prod.plaintext_problem().is_some());
    }
}
