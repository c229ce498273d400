//! A per-pod cache of channel connections (with decrypted secrets) for the webhook path,
//! invalidated across pods through Redis pub/sub (AA1: a cache, never the truth).
//!
//! Every pod subscribes to `{prefix}:connections:changed`; a pod that deletes or changes a
//! connection publishes its id and every pod drops it. The cache is used only while the
//! subscription is live: after a disconnect it is cleared and bypassed until the pod has
//! subscribed again, because messages published in between are lost. Entries also expire
//! after [`TTL`] as a backstop.

use futures::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use switchboard_coord::Redis;
use switchboard_store::connections::{self, Connection};
use switchboard_store::crypto::SecretCipher;
use switchboard_store::{PgPool, StoreError};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Longest time an entry is trusted without a reload.
pub const TTL: Duration = Duration::from_secs(60);

/// A connection with its decrypted secrets.
#[derive(Debug)]
pub struct Loaded {
    /// The connection.
    pub connection: Connection,
    /// Its secrets.
    pub secrets: serde_json::Value,
}

type Entries = HashMap<Uuid, (Instant, Arc<Loaded>)>;

/// Cheap to clone; all clones share one map.
#[derive(Clone)]
pub struct ConnectionCache {
    entries: Arc<RwLock<Entries>>,
    live: Arc<AtomicBool>,
    redis: Redis,
    channel: String,
}

impl ConnectionCache {
    /// Starts the invalidation subscriber; it stops with `token`.
    pub fn start(redis: Redis, token: CancellationToken) -> Self {
        let cache = Self {
            entries: Arc::default(),
            live: Arc::default(),
            channel: redis.key("connections:changed"),
            redis,
        };
        let subscriber = cache.clone();
        tokio::spawn(async move { subscriber.listen(token).await });
        cache
    }

    /// A live connection with its secrets, from the cache when it can be trusted.
    pub async fn get(
        &self,
        db: &PgPool,
        cipher: &SecretCipher,
        id: Uuid,
    ) -> Result<Option<Arc<Loaded>>, StoreError> {
        let live = self.live.load(Ordering::SeqCst);
        if live {
            if let Ok(entries) = self.entries.read() {
                if let Some((at, loaded)) = entries.get(&id) {
                    if at.elapsed() < TTL {
                        return Ok(Some(loaded.clone()));
                    }
                }
            }
        }
        let Some((connection, secrets)) = connections::get_with_secrets(db, cipher, id).await?
        else {
            return Ok(None);
        };
        let loaded = Arc::new(Loaded {
            connection,
            secrets,
        });
        if live {
            if let Ok(mut entries) = self.entries.write() {
                entries.insert(id, (Instant::now(), loaded.clone()));
            }
        }
        Ok(Some(loaded))
    }

    /// Drops `id` here and tells every other pod to drop it. Call after the change commits.
    pub async fn invalidate(&self, id: Uuid) {
        self.forget(id);
        let mut conn = self.redis.conn();
        let published: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(&self.channel)
            .arg(id.to_string())
            .query_async(&mut conn)
            .await;
        if let Err(e) = published {
            // Other pods keep the entry at most until it expires.
            tracing::warn!(error = %e, "could not publish a connection change");
        }
    }

    fn forget(&self, id: Uuid) {
        if let Ok(mut entries) = self.entries.write() {
            entries.remove(&id);
        }
    }

    fn reset(&self, live: bool) {
        self.live.store(false, Ordering::SeqCst);
        if let Ok(mut entries) = self.entries.write() {
            entries.clear();
        }
        self.live.store(live, Ordering::SeqCst);
    }

    async fn listen(self, token: CancellationToken) {
        loop {
            let subscribed = async {
                let mut pubsub = self.redis.client().get_async_pubsub().await?;
                pubsub.subscribe(&self.channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            };
            let pubsub = tokio::select! {
                () = token.cancelled() => return,
                result = subscribed => result,
            };
            match pubsub {
                Ok(pubsub) => {
                    // Whatever was published while we were away is lost: start empty.
                    self.reset(true);
                    let mut messages = pubsub.into_on_message();
                    loop {
                        tokio::select! {
                            () = token.cancelled() => return,
                            message = messages.next() => match message {
                                Some(message) => {
                                    if let Ok(id) = message.get_payload::<String>().map(|p| p.parse::<Uuid>()) {
                                        match id {
                                            Ok(id) => self.forget(id),
                                            Err(_) => self.reset(true),
                                        }
                                    }
                                }
                                None => break,
                            },
                        }
                    }
                    tracing::warn!("connection cache lost its subscription; bypassing the cache");
                }
                Err(e) => tracing::debug!(error = %e, "connection cache cannot subscribe yet"),
            }
            self.reset(false);
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}
