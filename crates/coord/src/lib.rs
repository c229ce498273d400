//! Redis coordination shared by every pod: one reconnecting connection per pod, every key
//! under a configurable prefix, and the small atomic primitives built on it.
//!
//! All Redis work in Switchboard goes through the `redis` crate (redis-rs): apalis-redis and
//! socketioxide-redis use it too, so one client brings one reconnect policy.

pub mod breaker;
mod conn;
pub mod dedup;
pub mod gcra;
mod sentinel;
pub mod subscription;
mod tls;

pub use conn::{Conn, LazyCluster, cluster_client};
pub use sentinel::{LazySentinel, WATCH_EVERY as SENTINEL_WATCH_EVERY};
pub use tls::{client, client_for_url};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::Arc;
use std::time::Duration;
use switchboard_config::{RedisEndpoint, RedisShape, RedisTls};

/// Errors from Redis coordination.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    /// The URL does not parse.
    #[error("REDIS_URL is not a valid Redis URL")]
    InvalidUrl,
    /// `REDIS_TLS_CA` could not be read.
    #[error("REDIS_TLS_CA names {path}, which cannot be read: {source}")]
    CaFile {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// TLS settings that need a `rediss://` URL were given a plaintext one.
    #[error("REDIS_TLS needs a rediss:// REDIS_URL")]
    TlsNeedsRediss,
    /// A command failed (connection lost, timeout, server error).
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),
    /// A command on a master found through sentinels failed.
    #[error("redis error (through REDIS_SENTINELS): {0}")]
    Sentinel(redis::RedisError),
}

impl CoordError {
    /// The setting that most likely fixes this failure, for `/ready`.
    pub fn setting(&self) -> Option<&'static str> {
        let (e, sentinel) = match self {
            CoordError::Redis(e) => (e, false),
            CoordError::Sentinel(e) => (e, true),
            CoordError::CaFile { .. } => return Some("REDIS_TLS_CA"),
            CoordError::TlsNeedsRediss => return Some("REDIS_TLS"),
            CoordError::InvalidUrl => return Some("REDIS_URL"),
        };
        let text = e.to_string().to_ascii_lowercase();
        // A sentinel lookup's failure names its setting in its text.
        for named in [
            "REDIS_SENTINEL_MASTER",
            "REDIS_SENTINEL_PASSWORD",
            "REDIS_PASSWORD",
            "REDIS_SENTINELS",
        ] {
            if text.contains(&named.to_ascii_lowercase()) {
                return Some(named);
            }
        }
        if text.contains("unknownissuer") || text.contains("unknown issuer") {
            Some("REDIS_TLS_CA")
        } else if text.contains("certificate") || text.contains("tls") || text.contains("handshake")
        {
            Some("REDIS_TLS")
        } else if e.is_connection_refusal() || e.is_timeout() || e.is_io_error() {
            Some(if sentinel {
                "REDIS_SENTINELS"
            } else {
                "REDIS_URL"
            })
        } else {
            None
        }
    }

    /// One line naming the setting to change, for logs.
    pub fn explain(&self) -> String {
        if !matches!(self, CoordError::Redis(_) | CoordError::Sentinel(_)) {
            // These name their setting already.
            return self.to_string();
        }
        match self.setting() {
            Some("REDIS_TLS_CA") => format!(
                "Redis's TLS certificate is not trusted: set REDIS_TLS_CA to the CA bundle that signed it ({self})"
            ),
            Some("REDIS_TLS") => format!(
                "the TLS handshake with Redis failed: check REDIS_TLS and REDIS_TLS_CA, and that the server speaks TLS on that port ({self})"
            ),
            Some("REDIS_URL") => {
                format!("Redis did not answer: check the host and port in REDIS_URL ({self})")
            }
            Some(setting) => format!("Redis did not answer: check {setting} ({self})"),
            None => self.to_string(),
        }
    }
}

/// The pod's Redis handle: a cheap-to-clone, self-reconnecting connection plus the key prefix.
#[derive(Clone)]
pub struct Redis {
    conn: Conn,
    target: Target,
    prefix: Arc<str>,
}

/// What the handle was built for, so components that need connections of their own
/// (pub/sub) build them the same way.
#[derive(Clone)]
pub enum Target {
    /// One server.
    Single(Arc<redis::Client>),
    /// A cluster's seed nodes and their TLS.
    Cluster {
        /// The seed URLs.
        urls: Arc<[String]>,
        /// The TLS every node connection uses.
        tls: RedisTls,
    },
    /// The master the sentinels name (the handle's own connection to it).
    Sentinel(LazySentinel),
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("prefix", &self.prefix)
            .field("cluster", &self.is_cluster())
            .finish_non_exhaustive()
    }
}

impl Redis {
    /// Creates the handle without connecting: the first command connects, and a lost
    /// connection is re-established on the next command. So a pod starts while Redis is
    /// briefly away, and `/ready` says so.
    pub fn connect_lazy(url: &str, tls: &RedisTls, prefix: &str) -> Result<Self, CoordError> {
        let client = client_for_url(url, tls)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        Ok(Self {
            conn: Conn::Single(conn),
            target: Target::Single(Arc::new(client)),
            prefix: Arc::from(prefix),
        })
    }

    /// [`Redis::connect_lazy`] for a single server, a cluster or a master found through
    /// sentinels, as `endpoint` says. A cluster or a sentinel-watched master is connected
    /// on first use too, and its connection follows failovers.
    pub fn connect(endpoint: &RedisEndpoint, prefix: &str) -> Result<Self, CoordError> {
        let no_push = None::<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>>;
        let (conn, target) = match &endpoint.shape {
            RedisShape::Single => {
                let url = endpoint.urls.first().ok_or(CoordError::InvalidUrl)?;
                return Self::connect_lazy(url, &endpoint.tls, prefix);
            }
            RedisShape::Cluster => {
                let client = cluster_client(&endpoint.urls, &endpoint.tls, no_push)?;
                let target = Target::Cluster {
                    urls: endpoint.urls.clone().into(),
                    tls: endpoint.tls.clone(),
                };
                (Conn::Cluster(LazyCluster::new(client)), target)
            }
            RedisShape::Sentinel(settings) => {
                let lazy = LazySentinel::new(&endpoint.urls, &endpoint.tls, settings, no_push)?;
                (Conn::Sentinel(lazy.clone()), Target::Sentinel(lazy))
            }
        };
        Ok(Self {
            conn,
            target,
            prefix: Arc::from(prefix),
        })
    }

    /// `{prefix}:{suffix}`: every key the app writes goes through here.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.prefix)
    }

    /// `{prefix}:{{group}}`: the stem of keys that one script or pipeline touches together.
    /// The braces are a Redis Cluster hash tag: every key that starts with this stem lives
    /// in one slot, so a script over them runs on one node.
    pub fn tagged(&self, group: &str) -> String {
        format!("{}:{{{group}}}", self.prefix)
    }

    /// The configured prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A clone of the shared multiplexed connection.
    pub fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// What the handle connects to, for components that need connections of their own.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Whether this is a Redis Cluster (sharded pub/sub, one slot per script).
    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster { .. })
    }

    /// Publishes `payload` on `channel`: `PUBLISH` on one server, `SPUBLISH` (sharded: only
    /// the channel's node carries it) on a cluster. Returns the receivers Redis counted.
    pub async fn publish(&self, channel: &str, payload: &str) -> Result<i64, CoordError> {
        let command = if self.is_cluster() {
            "SPUBLISH"
        } else {
            "PUBLISH"
        };
        let mut conn = self.conn();
        Ok(redis::cmd(command)
            .arg(channel)
            .arg(payload)
            .query_async(&mut conn)
            .await?)
    }

    /// Runs the commands `fill` adds for each of `keys` and returns their replies in order
    /// (replies marked `ignore` left out): in one round trip on a single server, and on a
    /// cluster as one pipeline per key, all in flight at once, since a cluster pipeline
    /// must stay within one slot.
    pub async fn pipeline_per_key<T: redis::FromRedisValue>(
        &self,
        keys: &[String],
        fill: impl Fn(&mut redis::Pipeline, &str),
    ) -> Result<Vec<T>, CoordError> {
        if !self.is_cluster() {
            let mut pipe = redis::pipe();
            for key in keys {
                fill(&mut pipe, key);
            }
            return Ok(pipe.query_async(&mut self.conn()).await?);
        }
        let calls = keys.iter().map(|key| {
            let mut pipe = redis::pipe();
            fill(&mut pipe, key);
            let mut conn = self.conn();
            async move { pipe.query_async::<Vec<T>>(&mut conn).await }
        });
        let replies = futures::future::try_join_all(calls).await?;
        Ok(replies.into_iter().flatten().collect())
    }

    /// `PING`, for readiness.
    pub async fn ping(&self) -> Result<(), CoordError> {
        let mut conn = self.conn();
        let pong: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
        match pong {
            Ok(_) => Ok(()),
            Err(e) if matches!(self.target, Target::Sentinel(_)) => Err(CoordError::Sentinel(e)),
            Err(e) => Err(e.into()),
        }
    }

    /// `SET {prefix}:{suffix} {value} NX PX ttl`: `true` when this call created the key
    /// (claims across pods: one alert per window, one probe per cool-down).
    pub async fn set_nx(
        &self,
        suffix: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, CoordError> {
        let mut conn = self.conn();
        let set: Option<String> = redis::cmd("SET")
            .arg(self.key(suffix))
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .query_async(&mut conn)
            .await?;
        Ok(set.is_some())
    }

    /// Sets the flag `{prefix}:{suffix}` for `ttl` (again from now if it is set): a shared
    /// "this happened recently" that expires on its own.
    pub async fn flag(&self, suffix: &str, ttl: Duration) -> Result<(), CoordError> {
        let mut conn = self.conn();
        let () = redis::cmd("SET")
            .arg(self.key(suffix))
            .arg(1)
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Whether the flag `{prefix}:{suffix}` is set (see [`Redis::flag`]).
    pub async fn flagged(&self, suffix: &str) -> Result<bool, CoordError> {
        let mut conn = self.conn();
        Ok(redis::cmd("EXISTS")
            .arg(self.key(suffix))
            .query_async(&mut conn)
            .await?)
    }
}
