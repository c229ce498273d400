//! Push notifications across pods: a push wakes the idle workers of every pod, not only of
//! the pod that pushed (see [`JobQueue::spawn_wake_listener`]).

use super::JobQueue;
use std::sync::Arc;
use std::time::Duration;
use switchboard_coord::Redis;
use switchboard_coord::subscription::{self, Notice};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Pause before a lost push subscription is tried again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

/// Tells the other pods' workers that a queue has new jobs: a Redis `PUBLISH` (`SPUBLISH` on a cluster) after each
/// push, on a channel per queue. The payload names the pushing instance, so a pod's own
/// listener skips what its worker was already woken for.
#[derive(Clone)]
pub(super) struct Announcer {
    pub(super) redis: Redis,
    pub(super) channel: Arc<str>,
    pub(super) instance: Arc<str>,
}

impl Announcer {
    /// Publishes without holding up the caller (a webhook waits for its push). A lost
    /// notification only leaves the other pods to their next poll.
    pub(super) fn announce(&self) {
        let redis = self.redis.clone();
        let channel = self.channel.clone();
        let instance = self.instance.clone();
        switchboard_domain::periodic::detach(async move {
            if let Err(e) = redis.publish(&channel, &instance).await {
                tracing::debug!(%channel, error = %e, "could not announce a push");
            }
        });
    }
}

impl<J> JobQueue<J> {
    /// Wakes this pod's idle workers whenever another pod pushes, until `token` is
    /// cancelled. The subscription is its own connection, re-established after any loss;
    /// what was announced meanwhile is found by the poll.
    pub fn spawn_wake_listener(&self, token: CancellationToken, tracker: &TaskTracker) {
        let announcer = self.announcer.clone();
        let pushed = self.pushed.clone();
        let name = self.name;
        tracker.spawn(async move {
            let redis = announcer.redis.clone();
            let channel = announcer.channel.clone();
            subscription::subscribe(&redis, &channel, RESUBSCRIBE_AFTER, token, |notice| {
                match notice {
                    // Whatever was pushed while unsubscribed is fetched now.
                    Notice::Subscribed => pushed.notify_one(),
                    Notice::Message(from) if from != *announcer.instance => pushed.notify_one(),
                    Notice::Message(_) => {}
                    Notice::Lost => tracing::warn!(
                        queue = name,
                        "lost the push notifications; polling until they are back"
                    ),
                    Notice::Unavailable(e) => tracing::debug!(
                        queue = name, error = %e, "cannot subscribe to push notifications yet"
                    ),
                }
            })
            .await;
        });
    }
}
