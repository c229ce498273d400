//! One connection type for a single Redis, a Redis Cluster and a master found through
//! sentinels ([`crate::LazySentinel`]), so every Redis user
//! (queues, limiter, breaker, dedup, realtime) is written once and runs on any of them.
//!
//! redis-rs has a self-reconnecting, lazily connecting manager for a single server, but its
//! cluster connection must be built against a reachable cluster: `get_async_connection`
//! fails when no seed answers, and nothing builds it again. [`LazyCluster`] is that
//! retrying builder: the first command connects, a failed attempt is retried by a later
//! command (after a short pause, so an outage does not turn every request into a connect
//! attempt), and once built the cluster connection follows failovers and slot moves itself
//! (MOVED and ASK are followed inside the client, never surfaced).
//!
//! Except when it does not: a slot refresh made while the cluster is still electing a master
//! can keep the dead master in the map, and then every command for its slots waits for the
//! node redis-rs is repairing in the background and times out, for as long as the pod runs
//! (seen under load on redis-rs 1.8). So a cluster connection on which commands have only
//! failed at the connection level for [`STUCK_AFTER`] is dropped and built again from the
//! seeds, which reads the slot map afresh.

use crate::CoordError;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ConnectionAddr, IntoConnectionInfo, Pipeline, ProtocolVersion, RedisError, RedisFuture,
    TlsCertificates, Value,
};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};
use switchboard_config::RedisTls;

/// How long one attempt to reach the cluster may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// After a failed attempt, commands fail at once for this long instead of trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// How long commands may fail at the connection level, with no success in between, before
/// the cluster connection is built again: longer than a failover's election (the test
/// clusters' node timeout is 1 s, managed services' a few seconds), so a rebuild comes
/// after the map could be right.
const STUCK_AFTER: Duration = Duration::from_secs(3);

/// A cheap-to-clone connection to the pod's Redis, whichever its shape.
#[derive(Clone)]
pub enum Conn {
    /// One server, through redis-rs's reconnecting manager.
    Single(ConnectionManager),
    /// A cluster, built on first use.
    Cluster(LazyCluster),
    /// The master the sentinels name, found on first use and again after a failover.
    Sentinel(crate::LazySentinel),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(lazy) => Box::pin(async move {
                let mut conn = lazy.get().await?;
                let result = conn.req_packed_command(cmd).await;
                lazy.observe(result.as_ref().err());
                result
            }),
            Conn::Sentinel(lazy) => lazy.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(cmd, offset, count),
            Conn::Cluster(lazy) => Box::pin(async move {
                let mut conn = lazy.get().await?;
                let result = conn.req_packed_commands(cmd, offset, count).await;
                lazy.observe(result.as_ref().err());
                result
            }),
            Conn::Sentinel(lazy) => lazy.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(_) | Conn::Sentinel(_) => 0,
        }
    }
}

/// A cluster connection built on first use and rebuilt on demand until it succeeds, or
/// after [`LazyCluster::reset`].
#[derive(Clone)]
pub struct LazyCluster {
    client: Arc<ClusterClient>,
    conn: Arc<RwLock<Option<ClusterConnection>>>,
    /// One connect attempt at a time; the others wait for its outcome.
    connecting: Arc<tokio::sync::Mutex<()>>,
    last_failure: Arc<Mutex<Option<(Instant, String)>>>,
    /// Since when every command on the current connection failed at the connection level.
    failing_since: Arc<Mutex<Option<Instant>>>,
}

impl LazyCluster {
    /// Connects nothing yet.
    pub fn new(client: ClusterClient) -> Self {
        Self {
            client: Arc::new(client),
            conn: Arc::default(),
            connecting: Arc::default(),
            last_failure: Arc::default(),
            failing_since: Arc::default(),
        }
    }

    /// Notes a command's outcome (`None` for success); rebuilds the connection once
    /// commands have only failed at the connection level for [`STUCK_AFTER`].
    fn observe(&self, error: Option<&RedisError>) {
        let mut since = self
            .failing_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match error {
            Some(e) if connection_level(e) => {
                let first = *since.get_or_insert_with(Instant::now);
                if first.elapsed() >= STUCK_AFTER {
                    *since = None;
                    drop(since);
                    tracing::warn!(error = %e, "Redis Cluster commands fail for {STUCK_AFTER:?}; connecting again from the seeds");
                    metrics::counter!("redis_cluster_reconnects_total").increment(1);
                    self.reset();
                }
            }
            _ => *since = None,
        }
    }

    fn current(&self) -> Option<ClusterConnection> {
        self.conn
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The cluster connection, connecting first if there is none.
    pub async fn get(&self) -> Result<ClusterConnection, RedisError> {
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        if let Some((at, why)) = &*self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            if at.elapsed() < RETRY_PAUSE {
                return Err(not_reached(why));
            }
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, self.client.get_async_connection());
        let result = match attempt.await {
            Ok(result) => result,
            Err(_) => Err(not_reached("no seed node answered in time")),
        };
        match result {
            Ok(conn) => {
                *self.conn.write().unwrap_or_else(PoisonError::into_inner) = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                *self
                    .last_failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    Some((Instant::now(), e.to_string()));
                Err(e)
            }
        }
    }

    /// Drops the connection, so the next [`LazyCluster::get`] builds a new one from the
    /// seeds. For pub/sub after a failover: redis-rs's own re-subscription does not reach
    /// the promoted master, a new connection's `SSUBSCRIBE` does.
    pub fn reset(&self) {
        *self.conn.write().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Whether `e` says the cluster could not be reached or routed to, rather than that a
/// node answered with an error of the command's own.
fn connection_level(e: &RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_timeout()
        || e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || matches!(
            e.kind(),
            ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Server(
                    ServerErrorKind::ClusterDown
                        | ServerErrorKind::Moved
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::MasterDown
                )
        )
}

fn not_reached(why: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        format!("the Redis Cluster is not reachable yet: {why}"),
    ))
}

/// A cluster client for the seed `urls` with `tls` applied, speaking RESP3 and handing
/// pushes to `push` when given (pub/sub needs both). Connects nothing yet.
pub fn cluster_client(
    urls: &[String],
    tls: &RedisTls,
    push: Option<impl redis::aio::AsyncPushSender>,
) -> Result<ClusterClient, CoordError> {
    let mut infos = Vec::with_capacity(urls.len());
    for url in urls {
        let info = url
            .as_str()
            .into_connection_info()
            .map_err(|_| CoordError::InvalidUrl)?;
        let tls_addr = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
        if tls_addr != !matches!(tls, RedisTls::Off) {
            return Err(CoordError::TlsNeedsRediss);
        }
        infos.push(info);
    }
    let mut builder = ClusterClientBuilder::new(infos)
        .connection_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(2))
        .retries(3)
        .max_retry_wait(500)
        .min_retry_wait(50);
    match tls {
        RedisTls::Off => {}
        RedisTls::Require => builder = builder.tls(redis::TlsMode::Insecure),
        RedisTls::Verify { ca } => {
            builder = builder.tls(redis::TlsMode::Secure);
            if let Some(path) = ca {
                builder = builder.certs(TlsCertificates {
                    client_tls: None,
                    root_cert: Some(crate::tls::ca_bundle(path)?),
                });
            }
        }
    }
    if let Some(push) = push {
        builder = builder
            .use_protocol(ProtocolVersion::RESP3)
            .push_sender(push);
    }
    Ok(builder.build()?)
}
