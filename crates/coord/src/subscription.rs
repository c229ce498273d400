//! A Redis pub/sub subscription that outlives lost connections: the connection manager
//! does not carry subscriptions over a reconnect, so every pod component that listens on a
//! channel goes through this one loop.

use crate::Redis;
use futures::StreamExt;
use std::time::Duration;
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
    Unavailable(redis::RedisError),
}

/// Subscribes to `channel` on a connection of its own and reports every change to `on`,
/// trying again `retry` after any loss, until `token` is cancelled.
pub async fn subscribe(
    redis: &Redis,
    channel: &str,
    retry: Duration,
    token: CancellationToken,
    mut on: impl FnMut(Notice),
) {
    loop {
        let subscribed = async {
            let mut pubsub = redis.client().get_async_pubsub().await?;
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
                let mut messages = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        () = token.cancelled() => return,
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
            Err(e) => on(Notice::Unavailable(e)),
        }
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(retry) => {}
        }
    }
}
