//! A Redis pub/sub subscription that outlives lost connections: the connection manager
//! does not carry subscriptions over a reconnect, so every pod component that listens on a
//! channel goes through this one loop. On a cluster the subscription is sharded
//! (`SSUBSCRIBE`, matching [`Redis::publish`]'s `SPUBLISH`) and a lost node means a new
//! connection, so the subscription follows a failover to the promoted master.

use crate::{CoordError, Redis, Target};
use futures::StreamExt;
use redis::{FromRedisValue, PushKind};
use std::time::Duration;
use switchboard_config::RedisTls;
use tokio_util::sync::CancellationToken;

/// What a [`subscribe`] loop tells its caller.
#[derive(Debug)]
pub enum Notice {
    /// The subscription stands (again). Whatever was published while it was down is lost.
    Subscribed,
    /// A message's payload.
    Message(String),
    /// The subscription dropped; the next attempt follows after the pause.
    Lost,
    /// Subscribing failed (Redis away); the next attempt follows after the pause.
    Unavailable(CoordError),
}

/// Subscribes to `channel` on a connection of its own and reports every change to `on`,
/// trying again `retry` after any loss, until `token` is cancelled.
pub async fn subscribe(
    redis: &Redis,
    channel: &str,
    retry: Duration,
    token: CancellationToken,
    on: impl FnMut(Notice),
) {
    match redis.target() {
        Target::Single(client) => {
            let client = || async { Ok((**client).clone()) };
            single(client, None, channel, retry, token, on).await;
        }
        // A subscriber on a demoted master would still hear what the new master publishes
        // (a replica gets it), but the master would not count it: it moves when the
        // handle's connection does, and asks the sentinels where the master is now.
        Target::Sentinel(lazy) => {
            let moved = lazy.switches();
            single(
                || lazy.master_client(),
                Some(moved),
                channel,
                retry,
                token,
                on,
            )
            .await;
        }
        Target::Cluster { urls, tls } => cluster(urls, tls, channel, retry, token, on).await,
    }
}

/// One server's pub/sub, on a connection to the server `client` gives at each attempt,
/// subscribed anew whenever `moved` changes.
async fn single<F: Future<Output = Result<redis::Client, redis::RedisError>>>(
    client: impl Fn() -> F,
    mut moved: Option<tokio::sync::watch::Receiver<u64>>,
    channel: &str,
    retry: Duration,
    token: CancellationToken,
    mut on: impl FnMut(Notice),
) {
    loop {
        let subscribed = async {
            let mut pubsub = client().await?.get_async_pubsub().await?;
            pubsub.subscribe(channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let pubsub = tokio::select! {
            () = token.cancelled() => return,
            result = subscribed => result,
        };
        match pubsub {
            Ok(pubsub) => {
                on(Notice::Subscribed);
                if let Some(moved) = moved.as_mut() {
                    moved.mark_unchanged();
                }
                let mut messages = pubsub.into_on_message();
                loop {
                    let master_moved = async {
                        let changed = match moved.as_mut() {
                            Some(moved) => moved.changed().await.is_ok(),
                            None => false,
                        };
                        if !changed {
                            std::future::pending::<()>().await;
                        }
                    };
                    tokio::select! {
                        () = token.cancelled() => return,
                        () = master_moved => break,
                        message = messages.next() => match message {
                            Some(message) => {
                                on(Notice::Message(message.get_payload().unwrap_or_default()));
                            }
                            None => break,
                        },
                    }
                }
                on(Notice::Lost);
            }
            Err(e) => on(Notice::Unavailable(CoordError::Redis(e))),
        }
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(retry) => {}
        }
    }
}

/// The cluster variant: one RESP3 cluster connection whose pushes come through a channel.
/// A `Disconnection` push ends it; the loop then subscribes on a new connection, which
/// reaches the channel's master even after a failover promoted another node.
async fn cluster(
    urls: &[String],
    tls: &RedisTls,
    channel: &str,
    retry: Duration,
    token: CancellationToken,
    mut on: impl FnMut(Notice),
) {
    loop {
        let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
        let subscribed = async {
            let client = crate::cluster_client(urls, tls, Some(tx))?;
            let mut conn = tokio::time::timeout(
                retry.max(Duration::from_secs(2)),
                client.get_async_connection(),
            )
            .await
            .map_err(|_| {
                CoordError::Redis(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no cluster node answered",
                )))
            })??;
            conn.ssubscribe(channel).await?;
            Ok::<_, CoordError>(conn)
        };
        let conn = tokio::select! {
            () = token.cancelled() => return,
            result = subscribed => result,
        };
        match conn {
            Ok(_conn) => {
                on(Notice::Subscribed);
                loop {
                    let push = tokio::select! {
                        () = token.cancelled() => return,
                        push = pushes.recv() => push,
                    };
                    let Some(push) = push else { break };
                    match push.kind {
                        PushKind::SMessage => {
                            let payload = push.data.into_iter().nth(1);
                            on(Notice::Message(
                                payload
                                    .and_then(|v| String::from_redis_value(v).ok())
                                    .unwrap_or_default(),
                            ));
                        }
                        // A node went away (a failover, say): subscribe anew on a new
                        // connection rather than count on the old one's re-subscription.
                        PushKind::Disconnection => break,
                        _ => {}
                    }
                }
                on(Notice::Lost);
            }
            Err(e) => on(Notice::Unavailable(e)),
        }
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(retry) => {}
        }
    }
}
