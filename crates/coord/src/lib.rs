//! Redis coordination shared by every pod: one reconnecting connection per pod, every key
//! under a configurable prefix, and the small atomic primitives built on it.
//!
//! All Redis work in Switchboard goes through the `redis` crate (redis-rs): apalis-redis and
//! socketioxide-redis use it too, so one client brings one reconnect policy.

pub mod breaker;
pub mod dedup;
pub mod gcra;
pub mod subscription;
mod tls;

pub use tls::{client, client_for_url};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::Arc;
use std::time::Duration;
use switchboard_config::RedisTls;

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
}

impl CoordError {
    /// The setting that most likely fixes this failure, for `/ready`.
    pub fn setting(&self) -> Option<&'static str> {
        let e = match self {
            CoordError::Redis(e) => e,
            CoordError::CaFile { .. } => return Some("REDIS_TLS_CA"),
            CoordError::TlsNeedsRediss => return Some("REDIS_TLS"),
            CoordError::InvalidUrl => return Some("REDIS_URL"),
        };
        let text = e.to_string().to_ascii_lowercase();
        if text.contains("unknownissuer") || text.contains("unknown issuer") {
            Some("REDIS_TLS_CA")
        } else if text.contains("certificate") || text.contains("tls") || text.contains("handshake")
        {
            Some("REDIS_TLS")
        } else if e.is_connection_refusal() || e.is_timeout() || e.is_io_error() {
            Some("REDIS_URL")
        } else {
            None
        }
    }

    /// One line naming the setting to change, for logs.
    pub fn explain(&self) -> String {
        if !matches!(self, CoordError::Redis(_)) {
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
            Some(_) => {
                format!("Redis did not answer: check the host and port in REDIS_URL ({self})")
            }
            None => self.to_string(),
        }
    }
}

/// The pod's Redis handle: a cheap-to-clone, self-reconnecting connection plus the key prefix.
#[derive(Clone)]
pub struct Redis {
    conn: ConnectionManager,
    client: redis::Client,
    prefix: Arc<str>,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("prefix", &self.prefix)
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
            conn,
            client,
            prefix: Arc::from(prefix),
        })
    }

    /// `{prefix}:{suffix}`: every key the app writes goes through here.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.prefix)
    }

    /// The configured prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A clone of the shared multiplexed connection.
    pub fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// The underlying client, for components that need their own connection (pub/sub,
    /// blocking queue reads).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// `PING`, for readiness.
    pub async fn ping(&self) -> Result<(), CoordError> {
        let mut conn = self.conn();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        Ok(())
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
}
