//! The deployment's shape: any pod serves any request, a Redis Cluster, and a Redis
//! watched by Sentinel.

mod cluster;
mod multi_pod;
mod sentinel;

use std::time::Duration;
use switchboard_coord::Redis;
use switchboard_coord::subscription::{self, Notice};
use tokio::sync::mpsc::UnboundedReceiver;

/// A subscription on a task of its own, as a pod's watchdog holds one, with what its loop
/// reports in order.
struct Listener {
    rx: UnboundedReceiver<Notice>,
    token: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Subscribed to `channel` (the loop retrying every 200 ms), its first notice awaited.
    async fn start(redis: &Redis, channel: &str) -> Listener {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let token = tokio_util::sync::CancellationToken::new();
        let task = {
            let (redis, channel, token) = (redis.clone(), channel.to_owned(), token.clone());
            tokio::spawn(async move {
                let every = Duration::from_millis(200);
                subscription::subscribe(&redis, &channel, every, token, |n| {
                    let _ = tx.send(n);
                })
                .await;
            })
        };
        let mut listener = Listener { rx, token, task };
        let first = tokio::time::timeout(Duration::from_secs(10), listener.rx.recv()).await;
        assert!(matches!(first, Ok(Some(Notice::Subscribed))), "{first:?}");
        listener
    }

    /// The next notice is the message `text` (within 10 s).
    async fn hears(&mut self, text: &str) {
        let got = tokio::time::timeout(Duration::from_secs(10), self.rx.recv()).await;
        assert!(
            matches!(&got, Ok(Some(Notice::Message(m))) if m == text),
            "{got:?}"
        );
    }

    /// Ends the loop.
    async fn stop(self) {
        self.token.cancel();
        self.task.await.expect("listener ends");
    }
}

/// What a subscription loop reported up to its next `Subscribed` (within `within`), and
/// whether it got there.
async fn until_subscribed(
    rx: &mut UnboundedReceiver<Notice>,
    within: Duration,
) -> (bool, Vec<String>) {
    let mut notices = Vec::new();
    let back = tokio::time::timeout(within, async {
        while let Some(n) = rx.recv().await {
            let back = matches!(n, Notice::Subscribed);
            notices.push(format!("{n:?}"));
            if back {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    (back, notices)
}
