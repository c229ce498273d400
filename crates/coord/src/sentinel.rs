//! A Redis watched by Sentinel: the sentinels name the master, and the pod follows it when
//! they promote a replica.
//!
//! redis-rs's `SentinelClient` finds the master (asking each sentinel, then checking with
//! `ROLE` that the node it names agrees), but a connection it hands out stays on that node
//! forever. After a failover the old master either is gone (commands fail) or comes back as
//! a replica, where reads still answer and only writes fail with `READONLY`: a publisher
//! there reaches no subscriber on the new master. So [`LazySentinel`] keeps one connection
//! to the master and drops it when a command finds the connection broken or the node read-
//! only, and a watcher asks the sentinels every [`WATCH_EVERY`] which node is the master,
//! dropping the connection as soon as the answer changes. The next command connects to the
//! new master.

use crate::CoordError;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo, Pipeline,
    ProtocolVersion, RedisError, RedisFuture, ServerErrorKind, TlsCertificates, TlsMode, Value,
};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};
use switchboard_config::{RedisTls, SentinelSettings};
use tokio::sync::watch;

/// How long finding the master and connecting to it may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// After a failed attempt, commands fail at once for this long instead of trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// How often the watcher asks the sentinels which node is the master.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);

/// A master found through sentinels, connected on first use and again after a failover.
/// Clones share the connection.
#[derive(Clone)]
pub struct LazySentinel {
    inner: Arc<Inner>,
}

struct Inner {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    master: String,
    config: AsyncConnectionConfig,
    conn: RwLock<Option<Current>>,
    /// One connect attempt at a time; the others wait for its outcome.
    connecting: tokio::sync::Mutex<()>,
    last_failure: Mutex<Option<(Instant, String)>>,
    watcher: std::sync::Once,
    /// Counts the connections dropped because the master changed or failed, for holders
    /// of subscriptions (they do not move by themselves).
    switched: watch::Sender<u64>,
}

#[derive(Clone)]
struct Current {
    conn: MultiplexedConnection,
    host: String,
    port: u16,
}

impl LazySentinel {
    /// Connects nothing yet. `push` (with RESP3) is for pub/sub on the connection.
    pub fn new(
        urls: &[String],
        tls: &RedisTls,
        settings: &SentinelSettings,
        push: Option<impl redis::aio::AsyncPushSender>,
    ) -> Result<Self, CoordError> {
        let mut addrs = Vec::with_capacity(urls.len());
        let mut url_login = (None, None);
        for url in urls {
            let info = url
                .as_str()
                .into_connection_info()
                .map_err(|_| CoordError::InvalidUrl)?;
            let tls_addr = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
            if tls_addr == matches!(tls, RedisTls::Off) {
                return Err(CoordError::TlsNeedsRediss);
            }
            let redis = info.redis_settings();
            if url_login.1.is_none() {
                url_login = (
                    redis.username().map(str::to_owned),
                    redis.password().map(str::to_owned),
                );
            }
            addrs.push(info.addr().clone());
        }
        let mut builder =
            SentinelClientBuilder::new(addrs, &settings.master, SentinelServerType::Master)?;
        // The settings' login wins over one written into the sentinel URLs.
        let sentinel_user = settings.sentinel_auth.username.clone().or(url_login.0);
        let sentinel_password = settings.sentinel_auth.password.clone().or(url_login.1);
        if let Some(user) = sentinel_user {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = sentinel_password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        if let Some(user) = &settings.node_auth.username {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = &settings.node_auth.password {
            builder = builder.set_client_to_redis_password(password);
        }
        match tls {
            RedisTls::Off => {}
            RedisTls::Require => {
                builder = builder
                    .set_client_to_sentinel_tls_mode(TlsMode::Insecure)
                    .set_client_to_redis_tls_mode(TlsMode::Insecure);
            }
            RedisTls::Verify { ca } => {
                builder = builder
                    .set_client_to_sentinel_tls_mode(TlsMode::Secure)
                    .set_client_to_redis_tls_mode(TlsMode::Secure);
                if let Some(path) = ca {
                    let bundle = crate::tls::ca_bundle(path)?;
                    let certs = || TlsCertificates {
                        client_tls: None,
                        root_cert: Some(bundle.clone()),
                    };
                    builder = builder
                        .set_client_to_sentinel_certificates(certs())
                        .set_client_to_redis_certificates(certs());
                }
            }
        }
        let mut config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(2)));
        if let Some(push) = push {
            builder = builder.set_client_to_redis_protocol(ProtocolVersion::RESP3);
            config = config.set_push_sender(push);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                sentinel: tokio::sync::Mutex::new(builder.build()?),
                master: settings.master.clone(),
                config,
                conn: RwLock::default(),
                connecting: tokio::sync::Mutex::default(),
                last_failure: Mutex::default(),
                watcher: std::sync::Once::new(),
                switched: watch::Sender::new(0),
            }),
        })
    }

    fn current(&self) -> Option<Current> {
        self.inner
            .conn
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The connection to the master, finding and connecting to it first if there is none.
    pub async fn get(&self) -> Result<MultiplexedConnection, RedisError> {
        self.watch();
        if let Some(current) = self.current() {
            return Ok(current.conn);
        }
        if let Some((at, why)) = &*self
            .inner
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            if at.elapsed() < RETRY_PAUSE {
                return Err(not_reached(why.clone()));
            }
        }
        let _one_at_a_time = self.inner.connecting.lock().await;
        if let Some(current) = self.current() {
            return Ok(current.conn);
        }
        let result = match tokio::time::timeout(CONNECT_TIMEOUT, self.connect()).await {
            Ok(result) => result,
            Err(_) => Err(not_reached(format!(
                "no sentinel in REDIS_SENTINELS named a reachable master for \"{}\" in time",
                self.inner.master
            ))),
        };
        match result {
            Ok(current) => {
                let conn = current.conn.clone();
                *self
                    .inner
                    .conn
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = Some(current);
                *self
                    .inner
                    .last_failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                Ok(conn)
            }
            Err(e) => {
                *self
                    .inner
                    .last_failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    Some((Instant::now(), e.to_string()));
                Err(e)
            }
        }
    }

    async fn connect(&self) -> Result<Current, RedisError> {
        let found = self.inner.sentinel.lock().await.async_get_client().await;
        let client = match found {
            Ok(client) => client,
            Err(e) => return Err(self.explained(e).await),
        };
        let (host, port) = match client.get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host.clone(), *port)
            }
            _ => (String::new(), 0),
        };
        let conn = client
            .get_multiplexed_async_connection_with_config(&self.inner.config)
            .await
            .map_err(|e| {
                if e.kind() == ErrorKind::AuthenticationFailed {
                    refused(format!(
                        "the master {host}:{port} refused the login: check REDIS_USERNAME and REDIS_PASSWORD ({e})"
                    ))
                } else {
                    e
                }
            })?;
        tracing::info!(host, port, master = %self.inner.master, "connected to the Redis master the sentinels name");
        Ok(Current { conn, host, port })
    }

    /// A sentinel lookup's failure with the setting that most likely fixes it in its text.
    async fn explained(&self, e: RedisError) -> RedisError {
        let master = &self.inner.master;
        match e.kind() {
            ErrorKind::MasterNameNotFoundBySentinel => refused(format!(
                "the sentinels know no master named \"{master}\" (or it is down): check REDIS_SENTINEL_MASTER ({e})"
            )),
            // The lookup logs in to a sentinel and then to the master it names: which one
            // refused is told by logging in to a sentinel alone.
            ErrorKind::AuthenticationFailed if self.sentinel_accepts_login().await => {
                refused(format!(
                    "the master the sentinels name refused the login: check REDIS_USERNAME and REDIS_PASSWORD ({e})"
                ))
            }
            ErrorKind::AuthenticationFailed => refused(format!(
                "the sentinels refused the login: check REDIS_SENTINEL_PASSWORD and REDIS_SENTINEL_USERNAME ({e})"
            )),
            _ if e.is_io_error() || e.is_connection_refusal() || e.is_timeout() => {
                not_reached(format!(
                    "no sentinel in REDIS_SENTINELS answered, or the master they name did not ({e})"
                ))
            }
            _ => e,
        }
    }

    /// A client for the master the sentinels name now, for a connection of the caller's
    /// own (pub/sub).
    pub async fn master_client(&self) -> Result<redis::Client, RedisError> {
        let lookup = async {
            let found = self.inner.sentinel.lock().await.async_get_client().await;
            match found {
                Ok(client) => Ok(client),
                Err(e) => Err(self.explained(e).await),
            }
        };
        tokio::time::timeout(CONNECT_TIMEOUT, lookup)
            .await
            .unwrap_or_else(|_| {
                Err(not_reached(format!(
                    "no sentinel in REDIS_SENTINELS named a reachable master for \"{}\" in time",
                    self.inner.master
                )))
            })
    }

    /// Drops the connection, so the next [`LazySentinel::get`] asks the sentinels again.
    pub fn reset(&self) {
        let dropped = self
            .inner
            .conn
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if dropped.is_some() {
            self.inner.switched.send_modify(|n| *n += 1);
        }
    }

    /// Changes each time the connection is dropped for a failover or a failure, so whoever
    /// holds subscriptions (on it, or on a connection of their own to the same master)
    /// makes them again on the next master. Each holder keeps its own receiver.
    pub fn switches(&self) -> watch::Receiver<u64> {
        self.inner.switched.subscribe()
    }

    /// After a command's failure: drops the connection when the failure means it no longer
    /// reaches the master, and says whether the command may be sent again at once (it was
    /// refused without effect).
    fn after_failure(&self, e: &RedisError) -> bool {
        let read_only = matches!(e.kind(), ErrorKind::Server(ServerErrorKind::ReadOnly));
        if read_only || e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
            tracing::warn!(error = %e, "the Redis master connection failed; asking the sentinels again");
            self.reset();
        }
        read_only
    }

    /// Whether a sentinel takes the sentinels' login (a `PING` after it).
    async fn sentinel_accepts_login(&self) -> bool {
        let login = async {
            let client = self
                .inner
                .sentinel
                .lock()
                .await
                .async_get_sentinel_client()
                .await?;
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&sentinel_config())
                .await?;
            redis::cmd("PING").query_async::<String>(&mut conn).await
        };
        matches!(
            tokio::time::timeout(CONNECT_TIMEOUT, login).await,
            Ok(Ok(_))
        )
    }

    /// Starts the watcher once, on the first command (inside the runtime).
    fn watch(&self) {
        self.inner.watcher.call_once(|| {
            let weak = Arc::downgrade(&self.inner);
            tokio::spawn(watch(weak));
        });
    }
}

/// A connection to one sentinel: short timeouts, since another sentinel can answer.
fn sentinel_config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(1)))
}

/// Asks the sentinels for the master's address every [`WATCH_EVERY`] and drops the
/// connection when it names another node. Ends when the last clone is dropped.
async fn watch(inner: Weak<Inner>) {
    let mut sentinel_conn: Option<MultiplexedConnection> = None;
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        let Some(current) = inner
            .conn
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            continue;
        };
        if sentinel_conn.is_none() {
            let client = tokio::time::timeout(CONNECT_TIMEOUT, async {
                inner
                    .sentinel
                    .lock()
                    .await
                    .async_get_sentinel_client()
                    .await
            })
            .await;
            if let Ok(Ok(client)) = client {
                sentinel_conn = client
                    .get_multiplexed_async_connection_with_config(&sentinel_config())
                    .await
                    .ok();
            }
        }
        let Some(conn) = sentinel_conn.as_mut() else {
            continue;
        };
        let named: Result<Option<(String, u16)>, RedisError> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&inner.master)
            .query_async(conn)
            .await;
        match named {
            Ok(Some((host, port)))
                if (host.as_str(), port) != (current.host.as_str(), current.port) =>
            {
                tracing::warn!(
                    from = %format!("{}:{}", current.host, current.port),
                    to = %format!("{host}:{port}"),
                    master = %inner.master,
                    "the sentinels promoted another Redis master; following it"
                );
                metrics::counter!("redis_sentinel_switches_total").increment(1);
                LazySentinel { inner }.reset();
            }
            Ok(_) => {}
            // That sentinel is away: the next round asks another one.
            Err(_) => sentinel_conn = None,
        }
    }
}

impl ConnectionLike for LazySentinel {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut conn = self.get().await?;
            match conn.req_packed_command(cmd).await {
                Err(e) if self.after_failure(&e) => self.get().await?.req_packed_command(cmd).await,
                result => result,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut conn = self.get().await?;
            match conn.req_packed_commands(cmd, offset, count).await {
                // A pipeline that met READONLY may have had its reads answered, never its
                // writes applied: the replica refused every write in it.
                Err(e) if self.after_failure(&e) => {
                    self.get()
                        .await?
                        .req_packed_commands(cmd, offset, count)
                        .await
                }
                result => result,
            }
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

fn not_reached(why: String) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::NotConnected, why))
}

fn refused(why: String) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        why,
    ))
}
