//! The socketioxide-redis [`Driver`] Switchboard uses: one redis-rs `ConnectionManager`
//! (RESP3) that publishes, subscribes and receives pushes on the same connection.
//!
//! Why not the crate's own `RedisDriver`: it holds one `MultiplexedConnection` that never
//! reconnects, so after `CLIENT KILL TYPE pubsub` or a Redis restart every publish fails with
//! `broken pipe` — and the adapter publishes before it delivers locally, so even this pod's
//! own sockets stop getting events. The manager reconnects on the next command or on the
//! disconnect push, and `set_automatic_resubscription` replays the subscriptions on the new
//! connection. A subscription that could not be made at all (Redis down at start) is kept in
//! the handler map anyway; the watchdog ([`crate::watchdog`]) subscribes it once Redis answers.
//!
//! Behind sentinels it is one RESP3 connection to the master they name
//! ([`switchboard_coord::LazySentinel`]); when they promote another node the connection is
//! dropped, [`PubSubDriver::lost`] wakes the watchdog, and it subscribes every channel again
//! on a connection to the new master.
//!
//! On a Redis Cluster the same driver speaks sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`) over
//! one RESP3 cluster connection built on first use ([`switchboard_coord::LazyCluster`]):
//! the channels share the `{sio}` hash tag, so they live on one shard, and redis-rs
//! subscribes them again on the new master after a failover.

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{
    FromRedisValue, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, RedisError, Value,
};
pub use socketioxide_redis::drivers::{ChanItem, Driver, MessageStream};
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use switchboard_config::{RedisEndpoint, RedisShape};
use switchboard_coord::{LazyCluster, LazySentinel};
use tokio::sync::{Notify, mpsc};

type Handlers = Arc<RwLock<HashMap<String, mpsc::Sender<ChanItem>>>>;

/// How long a subscribe may take before the adapter's start-up moves on without it.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Pub/sub over one self-reconnecting connection. Clones share the connection and handlers.
#[derive(Clone)]
pub struct PubSubDriver {
    conn: Conn,
    handlers: Handlers,
    /// Rung when a connection carrying subscriptions is lost, so the watchdog checks (and
    /// repairs) at once rather than at its next tick.
    lost: Arc<Notify>,
    /// Behind sentinels: changes when the connection was dropped for another master.
    switches: Option<Arc<tokio::sync::Mutex<tokio::sync::watch::Receiver<u64>>>>,
}

/// The driver's connection: one server, a cluster (sharded pub/sub), or the master the
/// sentinels name (its subscriptions made again by the watchdog after a failover).
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(LazyCluster),
    Sentinel(LazySentinel),
}

impl std::fmt::Debug for PubSubDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PubSubDriver")
            .field("channels", &self.channels())
            .finish_non_exhaustive()
    }
}

impl PubSubDriver {
    /// A lazy driver for `endpoint`: nothing connects until the first command, so a pod
    /// starts while Redis is away. The protocol is forced to RESP3 (pushes on a shared
    /// connection need it), whatever the URL says.
    pub fn new(endpoint: &RedisEndpoint) -> Result<Self, crate::RealtimeError> {
        let handlers: Handlers = Arc::default();
        let lost = Arc::new(Notify::new());
        let (routes, on_loss) = (handlers.clone(), lost.clone());
        let push = move |push: PushInfo| {
            route(&routes, &on_loss, push);
            Ok::<(), std::convert::Infallible>(())
        };
        match &endpoint.shape {
            RedisShape::Single => {}
            RedisShape::Cluster => {
                let client =
                    switchboard_coord::cluster_client(&endpoint.urls, &endpoint.tls, Some(push))?;
                return Ok(Self {
                    conn: Conn::Cluster(LazyCluster::new(client)),
                    handlers,
                    lost,
                    switches: None,
                });
            }
            RedisShape::Sentinel(settings) => {
                let lazy = LazySentinel::new(&endpoint.urls, &endpoint.tls, settings, Some(push))?;
                let switches = Some(Arc::new(tokio::sync::Mutex::new(lazy.switches())));
                return Ok(Self {
                    conn: Conn::Sentinel(lazy),
                    handlers,
                    lost,
                    switches,
                });
            }
        }
        let url = endpoint
            .urls
            .first()
            .ok_or(switchboard_coord::CoordError::InvalidUrl)?;
        let info = url.as_str().into_connection_info()?;
        let resp3 = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = switchboard_coord::client(info.set_redis_settings(resp3), &endpoint.tls)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500))
            .set_push_sender(push)
            .set_automatic_resubscription();
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self {
            conn: Conn::Single(conn),
            handlers,
            lost,
            switches: None,
        })
    }

    /// Runs `cmd` on the driver's connection, whichever its shape.
    async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, RedisError> {
        match &self.conn {
            Conn::Single(conn) => cmd.query_async(&mut conn.clone()).await,
            Conn::Cluster(lazy) => cmd.query_async(&mut lazy.get().await?).await,
            Conn::Sentinel(lazy) => cmd.query_async(&mut lazy.clone()).await,
        }
    }

    /// Whether the driver speaks sharded pub/sub.
    fn sharded(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    /// The channels the adapter asked for, whether or not Redis confirmed them yet.
    pub fn channels(&self) -> Vec<String> {
        let mut channels: Vec<String> = self
            .handlers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        channels.sort();
        channels
    }

    /// `PUBSUB NUMSUB` for `channels`: how many connections (on any pod) listen to each.
    pub async fn numsub(&self, channels: &[String]) -> Result<Vec<(String, i64)>, RedisError> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let reply: Value = match &self.conn {
            Conn::Single(_) | Conn::Sentinel(_) => {
                self.query(redis::cmd("PUBSUB").arg("NUMSUB").arg(channels))
                    .await?
            }
            // Asked of the shard that holds the channels (they share the `{sio}` tag): the
            // client's default for this command asks every node and cannot combine RESP3
            // maps.
            Conn::Cluster(lazy) => {
                let route = Route::with_key(&channels[0], SlotAddr::Master);
                let mut cmd = redis::cmd("PUBSUB");
                cmd.arg("SHARDNUMSUB").arg(channels);
                lazy.get()
                    .await?
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?
            }
        };
        // A flat array of name, count pairs; a map when a cluster's answers are combined.
        let pairs: Vec<(Value, Value)> = match reply {
            Value::Map(pairs) => pairs,
            Value::Array(items) => {
                let mut pairs = Vec::with_capacity(items.len() / 2);
                let mut items = items.into_iter();
                while let (Some(name), Some(count)) = (items.next(), items.next()) {
                    pairs.push((name, count));
                }
                pairs
            }
            other => {
                return Err(RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "PUBSUB NUMSUB answered neither an array nor a map",
                    format!("{other:?}"),
                )));
            }
        };
        let mut out = Vec::with_capacity(pairs.len());
        for (name, count) in pairs {
            out.push((
                String::from_redis_value(name)?,
                i64::from_redis_value(count)?,
            ));
        }
        Ok(out)
    }

    /// How many channels this pod's own connection is subscribed to (`CLIENT INFO`,
    /// `sub=`). `PUBSUB NUMSUB` cannot say it for the request channel every pod shares:
    /// another pod's subscription hides the loss of this one's.
    ///
    /// On a cluster the per-node connections are redis-rs's own and it subscribes them
    /// again after a reconnect or a slot move; this confirms every channel once more
    /// (`SSUBSCRIBE` is idempotent), which both checks and repairs, and counts them.
    pub async fn own_subscriptions(&self) -> Result<usize, RedisError> {
        if let Conn::Cluster(lazy) = &self.conn {
            let channels = self.channels();
            if !channels.is_empty() {
                lazy.get().await?.ssubscribe(&channels).await?;
            }
            return Ok(channels.len());
        }
        let info: String = self
            .query(&redis::cmd("CLIENT").arg("INFO").clone())
            .await?;
        Ok(info
            .split_whitespace()
            .find_map(|field| field.strip_prefix("sub="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    /// Subscribes `channels` again, after the watchdog found them missing. On a cluster
    /// the connection is built anew first (and `channels` must be all of them): after a
    /// failover the subscriptions redis-rs re-made on its own connection were not heard on
    /// the promoted master, while a new connection's are.
    pub async fn resubscribe(&self, channels: &[String]) -> Result<(), RedisError> {
        match &self.conn {
            Conn::Single(conn) => conn.clone().subscribe(channels).await,
            Conn::Cluster(lazy) => {
                lazy.reset();
                lazy.get().await?.ssubscribe(channels).await
            }
            Conn::Sentinel(lazy) => lazy.get().await?.subscribe(channels).await,
        }
    }

    /// Subscribes `channels` on the current connection.
    async fn subscribe_here(&self, channels: &[String]) -> Result<(), RedisError> {
        match &self.conn {
            Conn::Single(conn) => conn.clone().subscribe(channels).await,
            Conn::Cluster(lazy) => lazy.get().await?.ssubscribe(channels).await,
            Conn::Sentinel(lazy) => lazy.get().await?.subscribe(channels).await,
        }
    }

    /// Resolves when a connection carrying subscriptions was lost, or (behind sentinels)
    /// dropped because another node became the master.
    pub(crate) async fn lost(&self) {
        match &self.switches {
            Some(switches) => {
                let mut switches = switches.lock().await;
                tokio::select! {
                    () = self.lost.notified() => {}
                    _ = switches.changed() => {}
                }
            }
            None => self.lost.notified().await,
        }
    }
}

/// Hands a pushed message to the adapter stream waiting on its channel. Runs on the
/// connection's reader, so it must not block: a full stream drops the message (counted).
fn route(handlers: &Handlers, lost: &Notify, push: PushInfo) {
    match push.kind {
        PushKind::Message | PushKind::SMessage => {}
        PushKind::Disconnection => {
            lost.notify_one();
            metrics::counter!("realtime_pubsub_disconnects_total").increment(1);
            tracing::warn!("realtime pub/sub connection lost; reconnecting");
            return;
        }
        _ => return,
    }
    let mut data = push.data.into_iter();
    let (Some(chan), Some(body)) = (data.next(), data.next()) else {
        return;
    };
    let (Ok(chan), Ok(body)) = (
        String::from_redis_value(chan),
        Vec::<u8>::from_redis_value(body),
    ) else {
        metrics::counter!("realtime_adapter_errors_total", "op" => "decode").increment(1);
        return;
    };
    let guard = handlers.read().unwrap_or_else(PoisonError::into_inner);
    let Some(tx) = guard.get(&chan) else {
        return;
    };
    if tx.try_send((chan, body)).is_err() {
        metrics::counter!("realtime_adapter_errors_total", "op" => "stream_full").increment(1);
        tracing::warn!("realtime adapter stream full; a cross-pod message was dropped");
    }
}

impl Driver for PubSubDriver {
    type Error = RedisError;

    async fn publish(&self, chan: String, val: Vec<u8>) -> Result<(), RedisError> {
        let command = if self.sharded() {
            "SPUBLISH"
        } else {
            "PUBLISH"
        };
        let _receivers: i64 = self.query(redis::cmd(command).arg(chan).arg(val)).await?;
        Ok(())
    }

    async fn subscribe(
        &self,
        chan: String,
        size: usize,
    ) -> Result<MessageStream<ChanItem>, RedisError> {
        let (tx, rx) = mpsc::channel(size);
        self.handlers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(chan.clone(), tx);
        let subscribed = self.subscribe_here(std::slice::from_ref(&chan));
        match tokio::time::timeout(SUBSCRIBE_TIMEOUT, subscribed).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => subscribe_failed(&chan, &e.to_string()),
            Err(_) => subscribe_failed(&chan, "timed out"),
        }
        Ok(MessageStream::new(rx))
    }

    async fn unsubscribe(&self, chan: String) -> Result<(), RedisError> {
        self.handlers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&chan);
        match &self.conn {
            Conn::Single(conn) => conn.clone().unsubscribe(chan).await,
            Conn::Cluster(lazy) => lazy.get().await?.sunsubscribe(chan).await,
            Conn::Sentinel(lazy) => lazy.get().await?.unsubscribe(chan).await,
        }
    }

    async fn num_serv(&self, chan: &str) -> Result<u16, RedisError> {
        let counts = self.numsub(&[chan.to_owned()]).await?;
        let n = counts.first().map_or(0, |(_, n)| *n);
        Ok(u16::try_from(n).unwrap_or(u16::MAX))
    }
}

fn subscribe_failed(chan: &str, error: &str) {
    metrics::counter!("realtime_adapter_errors_total", "op" => "subscribe").increment(1);
    tracing::warn!(
        chan,
        error,
        "realtime subscribe failed; the watchdog retries it"
    );
}
