//! The deployment's shape: any pod serves any request, a Redis Cluster, and a Redis
//! watched by Sentinel.

mod cluster;
mod multi_pod;
mod sentinel;

/// What a subscription loop reported up to its next `Subscribed` (within `within`), and
/// whether it got there.
async fn until_subscribed(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<switchboard_coord::subscription::Notice>,
    within: std::time::Duration,
) -> (bool, Vec<String>) {
    let mut notices = Vec::new();
    let back = tokio::time::timeout(within, async {
        while let Some(n) = rx.recv().await {
            let back = matches!(n, switchboard_coord::subscription::Notice::Subscribed);
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
