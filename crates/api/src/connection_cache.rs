//! A per-pod cache of channel connections (with decrypted secrets) for the webhook path,
//! invalidated across pods through Redis pub/sub (AA1: a cache, never the truth).
//!
//! Every pod subscribes to `{prefix}:connections:changed`; a pod that deletes or changes a
//! connection (`PATCH`, e.g. a secret rotation) publishes its id after the commit and every
//! pod drops it, so the change holds everywhere within the publish's delivery time. The
//! cache is used only while the subscription is live: after a disconnect it is cleared and
//! bypassed until the pod has subscribed again, because messages published in between are
//! lost. A lookup that was already reading Postgres when a drop arrived may have read the
//! row from before the change: it answers its own request but is not kept (the cache's
//! generation moved on meanwhile). Entries also expire after [`TTL`] as a backstop, the
//! bound when a publish fails.
//!
//! Unknown ids are remembered too, for [`MISS_TTL`]: a webhook for a connection that does
//! not exist is refused without a Postgres query while its miss is remembered, and at most
//! [`LOOKUPS`] lookups run at once per pod, so requests nobody authenticated (the
//! connection id comes before any signature) cannot take the pool the accept path needs.
//! Creating a connection invalidates its id like any other change.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use switchboard_coord::Redis;
use switchboard_coord::subscription::{self, Notice};
use switchboard_store::connections::{self, Connection, Secrets};
use switchboard_store::crypto::SecretCipher;
use switchboard_store::{PgPool, StoreError};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// Longest time an entry is trusted without a reload.
pub const TTL: Duration = Duration::from_secs(60);

/// How long an unknown id is answered "no such connection" without asking Postgres.
pub const MISS_TTL: Duration = Duration::from_secs(30);

/// Most entries kept; past it, expired ones are dropped and new misses are not remembered.
pub const MAX_ENTRIES: usize = 50_000;

/// Postgres lookups one pod runs at once for this cache.
pub const LOOKUPS: usize = 2;
/// Pause before a lost invalidation subscription is tried again (the cache is bypassed
/// meanwhile).
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

/// A connection with its decrypted secrets (which `Debug` does not show).
#[derive(Debug)]
pub struct Loaded {
    /// The connection.
    pub connection: Connection,
    /// Its secrets.
    pub secrets: Secrets,
}

/// A connection, or `None` for an id Postgres did not know, with when it was read.
type Entries = HashMap<Uuid, (Instant, Option<Arc<Loaded>>)>;

/// Cheap to clone; all clones share one map.
#[derive(Clone)]
pub struct ConnectionCache {
    entries: Arc<RwLock<Entries>>,
    live: Arc<AtomicBool>,
    redis: Redis,
    channel: String,
    lookups: Arc<Semaphore>,
    queries: Arc<AtomicU64>,
    /// Bumped by every drop, under the entries' write lock: a lookup keeps what it read
    /// only if no drop came in while it was reading.
    generation: Arc<AtomicU64>,
}

impl ConnectionCache {
    /// Starts the invalidation subscriber on `tracker`; it stops with `token`.
    pub fn start(redis: Redis, token: CancellationToken, tracker: &TaskTracker) -> Self {
        let cache = Self {
            entries: Arc::default(),
            live: Arc::default(),
            channel: redis.key("connections:changed"),
            redis,
            lookups: Arc::new(Semaphore::new(LOOKUPS)),
            queries: Arc::default(),
            generation: Arc::default(),
        };
        let subscriber = cache.clone();
        tracker.spawn(async move { subscriber.listen(token).await });
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
            if let Some(cached) = self.cached(id) {
                return Ok(cached);
            }
        }
        let _permit = self.lookups.acquire().await.ok();
        // Another request may have loaded it while this one waited.
        if live {
            if let Some(cached) = self.cached(id) {
                return Ok(cached);
            }
        }
        self.queries.fetch_add(1, Ordering::Relaxed);
        let generation = self.generation.load(Ordering::SeqCst);
        let loaded =
            connections::get_with_secrets(db, cipher, id)
                .await?
                .map(|(connection, secrets)| {
                    Arc::new(Loaded {
                        connection,
                        secrets,
                    })
                });
        if live {
            if let Ok(mut entries) = self.entries.write() {
                if self.generation.load(Ordering::SeqCst) != generation {
                    return Ok(loaded);
                }
                if entries.len() >= MAX_ENTRIES {
                    entries.retain(|_, (at, e)| {
                        at.elapsed() < if e.is_some() { TTL } else { MISS_TTL }
                    });
                }
                if loaded.is_some() || entries.len() < MAX_ENTRIES {
                    entries.insert(id, (Instant::now(), loaded.clone()));
                }
            }
        }
        Ok(loaded)
    }

    /// What the cache can answer for `id` without Postgres: `Some(None)` for a remembered
    /// miss.
    fn cached(&self, id: Uuid) -> Option<Option<Arc<Loaded>>> {
        let entries = self.entries.read().ok()?;
        match entries.get(&id)? {
            (at, Some(loaded)) if at.elapsed() < TTL => Some(Some(loaded.clone())),
            (at, None) if at.elapsed() < MISS_TTL => Some(None),
            _ => None,
        }
    }

    /// How many Postgres lookups this cache has made (for tests and diagnostics).
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// Drops `id` here and tells every other pod to drop it. Call after the change commits.
    pub async fn invalidate(&self, id: Uuid) {
        self.forget(id);
        if let Err(e) = self.redis.publish(&self.channel, &id.to_string()).await {
            // Other pods keep the entry at most until it expires.
            tracing::warn!(error = %e, "could not publish a connection change");
        }
    }

    fn forget(&self, id: Uuid) {
        if let Ok(mut entries) = self.entries.write() {
            self.generation.fetch_add(1, Ordering::SeqCst);
            entries.remove(&id);
        }
    }

    fn reset(&self, live: bool) {
        self.live.store(false, Ordering::SeqCst);
        if let Ok(mut entries) = self.entries.write() {
            self.generation.fetch_add(1, Ordering::SeqCst);
            entries.clear();
        }
        self.live.store(live, Ordering::SeqCst);
    }

    async fn listen(self, token: CancellationToken) {
        let redis = self.redis.clone();
        let channel = self.channel.clone();
        subscription::subscribe(&redis, &channel, RESUBSCRIBE_AFTER, token, |notice| {
            match notice {
                // Whatever was published while we were away is lost: start empty.
                Notice::Subscribed => self.reset(true),
                Notice::Message(payload) => match payload.parse::<Uuid>() {
                    Ok(id) => self.forget(id),
                    Err(_) => self.reset(true),
                },
                Notice::Lost => {
                    tracing::warn!("connection cache lost its subscription; bypassing the cache");
                    self.reset(false);
                }
                Notice::Unavailable(e) => {
                    tracing::debug!(error = %e, "connection cache cannot subscribe yet");
                    self.reset(false);
                }
            }
        })
        .await;
    }
}

/// The flows' changes to a connection reach every pod's cache through it.
#[async_trait::async_trait]
impl switchboard_flows::connections::Cache for ConnectionCache {
    async fn invalidate(&self, id: Uuid) {
        ConnectionCache::invalidate(self, id).await;
    }
}
