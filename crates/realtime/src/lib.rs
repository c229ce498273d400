//! Realtime delivery (SPEC §3 F4): Socket.IO on the API's port, websocket transport only
//! (AA6: long-polling would need sticky sessions), fanned out across pods by the
//! socketioxide Redis adapter over [`driver::PubSubDriver`].
//!
//! Flows store their events in the event outbox inside their own transactions; the
//! [`relay`] numbers them per org ([`events`]) and publishes them, so a client that sees a
//! gap in `seq` or reconnects fetches what it missed from `GET /events`. Pod memory holds
//! only the sockets of this pod and the last watchdog result (AA1).

mod caps;
pub mod driver;
pub use switchboard_store::events;
mod handshake;
mod presence;
mod relay;
pub mod sessions;
pub mod watchdog;

pub use caps::ClientAddress;
pub use presence::{PresenceEvent, Viewer};

pub use handshake::{
    HandshakeHold, TokenClaims, TokenError, TokenVerifier, experts_room, org_room, rooms_for,
    user_room,
};
pub use sessions::SessionCheck;
pub use watchdog::AdapterHealth;

use relay::{RealtimeEmitter, Relay};
use socketioxide::extract::SocketRef;
use socketioxide::handler::ConnectHandler;
use socketioxide::layer::SocketIoLayer;
use socketioxide::{SocketIo, TransportType};
use socketioxide_redis::{CustomRedisAdapter, RedisAdapterConfig, RedisAdapterCtr};
use std::sync::Arc;
use std::time::Duration;
use switchboard_config::Config;
use switchboard_domain::Emitter;
use switchboard_store::PgPool;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The adapter type of every namespace: socketioxide-redis over Switchboard's driver.
pub type Adapter = CustomRedisAdapter<socketioxide::adapter::Emitter, driver::PubSubDriver>;

/// Why realtime could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RealtimeError {
    /// `REDIS_URL` is not usable for the adapter.
    #[error("realtime: invalid Redis URL for the Socket.IO adapter: {0}")]
    Redis(#[from] redis::RedisError),
    /// The adapter could not start.
    #[error("realtime: the Socket.IO adapter did not start: {0}")]
    Adapter(String),
    /// The client could not be built with the TLS settings.
    #[error("realtime: {0}")]
    Client(#[from] switchboard_coord::CoordError),
}

/// What realtime needs from the pod's configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `REDIS_URL` or `REDIS_CLUSTER_NODES`, with their TLS; RESP3 is forced for the
    /// adapter's connection.
    pub redis: switchboard_config::RedisEndpoint,
    /// `REDIS_PREFIX`: the adapter's channels are `{prefix}:{sio}-…`, so deployments (and
    /// parallel tests) sharing a Redis never see each other's events, and the `{sio}` hash
    /// tag keeps every channel in one cluster slot (sharded pub/sub re-subscribes them in
    /// one command, which a cluster rejects with `CROSSSLOT` across slots).
    pub redis_prefix: String,
    /// How often the subscription watchdog runs.
    pub watchdog_interval: Duration,
    /// How often the relay polls the event outbox without being woken.
    pub relay_poll: Duration,
    /// Sockets one user may hold on this pod at once (`SOCKETS_PER_USER`; 0: no cap).
    pub sockets_per_user: u32,
    /// Sockets one client address may hold on this pod at once (`SOCKETS_PER_ADDRESS`).
    pub sockets_per_address: u32,
}

impl Settings {
    /// The settings of a pod with `config`, whose Redis is `redis`.
    pub fn new(config: &Config, redis: switchboard_config::RedisEndpoint) -> Self {
        Self {
            redis,
            redis_prefix: config.redis.prefix.clone(),
            watchdog_interval: config.realtime.watchdog_interval,
            relay_poll: config.realtime.relay_poll,
            sockets_per_user: config.realtime.sockets_per_user,
            sockets_per_address: config.realtime.sockets_per_address,
        }
    }

    /// The adapter's channel prefix.
    pub fn channel_prefix(&self) -> String {
        format!("{}:{{sio}}", self.redis_prefix)
    }
}

/// The pod's realtime handle: the Socket.IO layer to mount, the emitter for the flows, and
/// the adapter's health. Cheap to clone.
#[derive(Clone)]
pub struct Realtime {
    io: SocketIo<Adapter>,
    layer: SocketIoLayer<Adapter>,
    driver: driver::PubSubDriver,
    health: Arc<watchdog::HealthCell>,
    emitter: Arc<RealtimeEmitter>,
    gate: Arc<handshake::Gate>,
    presence: presence::Presence,
    db: PgPool,
    settings: Arc<Settings>,
}

impl Realtime {
    /// Builds Socket.IO with the Redis adapter and subscribes the adapter's channels. Redis
    /// being away is not fatal: the channels are subscribed once it answers.
    pub async fn build(
        settings: Settings,
        db: PgPool,
        verify: TokenVerifier,
        tracker: TaskTracker,
    ) -> Result<Realtime, RealtimeError> {
        let driver = driver::PubSubDriver::new(&settings.redis)?;
        let adapter = RedisAdapterCtr::new_with_driver(
            driver.clone(),
            RedisAdapterConfig::new().with_prefix(settings.channel_prefix()),
        );
        let (layer, io) = SocketIo::builder()
            .transports([TransportType::Websocket])
            .with_adapter::<Adapter>(adapter)
            .build_layer();
        let gate = Arc::new(handshake::Gate {
            db: db.clone(),
            verify,
            tracker: tracker.clone(),
            hold: handshake::HoldPoint::default(),
            caps: caps::SocketCaps::new(settings.sockets_per_user, settings.sockets_per_address),
        });
        let presence = presence::Presence::new(
            switchboard_coord::Redis::connect(&settings.redis, &settings.redis_prefix)?,
            db.clone(),
        );
        let connect = {
            let presence = presence.clone();
            move |socket: SocketRef<Adapter>| handshake::on_connect(socket, presence.clone())
        };
        io.ns("/", connect.with(handshake::middleware(gate.clone())))
            .await
            .map_err(|e| RealtimeError::Adapter(e.to_string()))?;
        let health: Arc<watchdog::HealthCell> = Arc::default();
        let relay = Arc::new(Relay::new(
            db.clone(),
            io.clone(),
            settings.relay_poll,
            health.clone(),
            driver.clone(),
        ));
        Ok(Realtime {
            io,
            layer,
            driver,
            health,
            emitter: Arc::new(RealtimeEmitter::new(relay, tracker)),
            gate,
            presence,
            db,
            settings: Arc::new(settings),
        })
    }

    /// The tower layer serving `/socket.io` on the API's router.
    pub fn layer(&self) -> SocketIoLayer<Adapter> {
        self.layer.clone()
    }

    /// The emitter the flows wake after their commits.
    pub fn emitter(&self) -> Arc<dyn Emitter> {
        self.emitter.clone()
    }

    /// The adapter's health as the watchdog last saw it.
    pub fn health(&self) -> AdapterHealth {
        self.health.get()
    }

    /// Closes every socket of `user_id` on every pod (through the Redis adapter) at once,
    /// e.g. after their tokens were revoked. Without Redis only this pod's sockets can be
    /// reached, and a warning says so; every pod's session check closes the others within
    /// [`sessions::CHECK_INTERVAL`] anyway.
    pub async fn disconnect_user(&self, user_id: uuid::Uuid) {
        let room = user_room(user_id);
        if let Err(e) = self.io.to(room.clone()).disconnect().await {
            tracing::warn!(%user_id, error = %e, "could not close the user's sockets on other pods");
            if let Err(e) = self.io.local().to(room).disconnect().await {
                tracing::warn!(%user_id, error = %e, "could not close the user's sockets");
            }
        }
    }

    /// Re-checks this pod's sockets against Postgres now (the session check does this every
    /// [`sessions::CHECK_INTERVAL`]) and closes the revoked ones.
    pub async fn check_sessions(&self) -> Result<SessionCheck, switchboard_store::StoreError> {
        sessions::check(&self.io, &self.db).await
    }

    /// Tests only: stops the next handshake on this pod after it joined its rooms and before
    /// it reads the user's standing again, until the returned hold is released.
    #[doc(hidden)]
    pub fn hold_next_handshake(&self) -> HandshakeHold {
        self.gate.hold.arm()
    }

    /// Sockets connected to this pod.
    pub fn local_sockets(&self) -> usize {
        self.io.of("/").map_or(0, |ns| ns.local().sockets().len())
    }

    /// Checks the adapter's subscriptions now (the watchdog does this every tick).
    pub async fn check_subscriptions(&self) -> AdapterHealth {
        watchdog::check(&self.driver, &self.health).await;
        self.health.get()
    }

    /// Starts the relay, the watchdog and the session check on `tracker`, and closes
    /// every socket when `token` is cancelled (after the drain delay), so clients reconnect
    /// to another pod and catch up through `GET /events`; what the pod emits after that
    /// still reaches the other pods.
    pub fn spawn_background(&self, token: CancellationToken, tracker: &TaskTracker) {
        self.emitter.spawn(&token);
        watchdog::spawn(
            self.driver.clone(),
            self.health.clone(),
            self.settings.watchdog_interval,
            token.clone(),
            tracker,
        );
        self.presence.spawn(self.io.clone(), &token, tracker);
        sessions::spawn(
            self.io.clone(),
            self.db.clone(),
            sessions::CHECK_INTERVAL,
            token.clone(),
            tracker,
        );
        let io = self.io.clone();
        tracker.spawn(async move {
            token.cancelled().await;
            let sockets = io.of("/").map_or(0, |ns| ns.local().sockets().len());
            tracing::info!(sockets, "closing realtime sockets");
            io.close().await;
            // Jobs still finishing on this pod keep emitting: a namespace that admits nobody
            // keeps their events flowing through the adapter to the other pods' sockets.
            if let Err(e) = io
                .ns(
                    "/",
                    (async |_: SocketRef<Adapter>| {}).with(handshake::closed),
                )
                .await
            {
                tracing::warn!(error = %e, "realtime: no adapter for the last emits");
            }
        });
    }
}
