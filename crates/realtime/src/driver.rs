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

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, RedisError};
pub use socketioxide_redis::drivers::{ChanItem, Driver, MessageStream};
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use switchboard_config::RedisTls;
use tokio::sync::mpsc;

type Handlers = Arc<RwLock<HashMap<String, mpsc::Sender<ChanItem>>>>;

/// How long a subscribe may take before the adapter's start-up moves on without it.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Pub/sub over one self-reconnecting connection. Clones share the connection and handlers.
#[derive(Clone)]
pub struct PubSubDriver {
    conn: ConnectionManager,
    handlers: Handlers,
}

impl std::fmt::Debug for PubSubDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PubSubDriver")
            .field("channels", &self.channels())
            .finish_non_exhaustive()
    }
}

impl PubSubDriver {
    /// A lazy driver for `url`: nothing connects until the first command, so a pod starts
    /// while Redis is away. The protocol is forced to RESP3 (pushes on a shared connection
    /// need it), whatever the URL says.
    pub fn new(url: &str, tls: &RedisTls) -> Result<Self, crate::RealtimeError> {
        let info = url.into_connection_info()?;
        let resp3 = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = switchboard_coord::client(info.set_redis_settings(resp3), tls)?;
        let handlers: Handlers = Arc::default();
        let routes = handlers.clone();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500))
            .set_push_sender(move |push: PushInfo| {
                route(&routes, push);
                Ok::<(), std::convert::Infallible>(())
            })
            .set_automatic_resubscription();
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self { conn, handlers })
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
        let mut conn = self.conn.clone();
        let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channels)
            .query_async(&mut conn)
            .await?;
        let mut out = Vec::with_capacity(channels.len());
        let mut items = reply.into_iter();
        while let (Some(name), Some(count)) = (items.next(), items.next()) {
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
    pub async fn own_subscriptions(&self) -> Result<usize, RedisError> {
        let mut conn = self.conn.clone();
        let info: String = redis::cmd("CLIENT")
            .arg("INFO")
            .query_async(&mut conn)
            .await?;
        Ok(info
            .split_whitespace()
            .find_map(|field| field.strip_prefix("sub="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    /// Subscribes `channels` again, e.g. after the watchdog found them missing.
    pub async fn resubscribe(&self, channels: &[String]) -> Result<(), RedisError> {
        self.conn.clone().subscribe(channels).await
    }
}

/// Hands a pushed message to the adapter stream waiting on its channel. Runs on the
/// connection's reader, so it must not block: a full stream drops the message (counted).
fn route(handlers: &Handlers, push: PushInfo) {
    match push.kind {
        PushKind::Message | PushKind::SMessage => {}
        PushKind::Disconnection => {
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
        let mut conn = self.conn.clone();
        let _receivers: i64 = redis::cmd("PUBLISH")
            .arg(chan)
            .arg(val)
            .query_async(&mut conn)
            .await?;
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
        let mut conn = self.conn.clone();
        match tokio::time::timeout(SUBSCRIBE_TIMEOUT, conn.subscribe(&chan)).await {
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
        self.conn.clone().unsubscribe(chan).await
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
