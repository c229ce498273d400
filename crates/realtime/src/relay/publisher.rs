//! Publishing a numbered event to the org's room on every pod through the Redis adapter,
//! and delivering a burst to this pod's own sockets when the relay serves them from the log.

use super::LOCAL_STALL;
use crate::Adapter;
use crate::handshake::org_room;
use serde_json::Value;
use socketioxide::{BroadcastError, SendError, SocketError, SocketIo};
use std::time::Duration;
use switchboard_domain::EventKind;
use tokio::time::Instant;
use uuid::Uuid;

/// A cross-pod publish slower than this is given up; the local fallback delivers the event.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(3);

/// Publishes numbered events to the org's room on every pod.
pub(super) struct Publisher {
    pub(super) io: SocketIo<Adapter>,
}

impl Publisher {
    /// Publishes through the adapter, which then delivers to this pod's sockets too. The
    /// adapter publishes before it delivers locally, so on an error (Redis away, or slower
    /// than [`PUBLISH_TIMEOUT`]) this pod's sockets did not get it either: the relay pauses
    /// and its local fallback serves them from the log, in order.
    pub(super) async fn broadcast(
        &self,
        org_id: Uuid,
        event: &str,
        data: &Value,
    ) -> Result<(), PublishError> {
        let Some(ns) = self.io.of("/") else {
            tracing::debug!(event, "sockets closed; event kept for GET /events");
            return Ok(());
        };
        let sent = tokio::time::timeout(PUBLISH_TIMEOUT, ns.to(org_room(org_id)).emit(event, data));
        let error = match sent.await {
            // Out; some local socket may not have taken it (closing, full).
            Ok(Ok(()) | Err(BroadcastError::Socket(_))) => {
                metrics::counter!("realtime_emits_total", "event" => metric_name(event))
                    .increment(1);
                return Ok(());
            }
            Ok(Err(e @ BroadcastError::Serialize(_))) => {
                tracing::error!(event, error = %e, "realtime event could not be encoded");
                return Ok(());
            }
            Ok(Err(BroadcastError::Adapter(e))) => PublishError::Adapter(e.to_string()),
            Err(_) => PublishError::TimedOut,
        };
        metrics::counter!("realtime_adapter_errors_total", "op" => "publish").increment(1);
        Err(error)
    }

    /// Delivers one org's events, in order, to this pod's sockets only; returns how many
    /// events went out. Socket by socket: a burst read from the log outruns a socket's
    /// writer (socketioxide buffers 128 packets per socket and refuses more), so a full
    /// socket is waited for, up to [`LOCAL_STALL`] per burst; one that stays full (a client
    /// that stopped reading) misses the rest, which its `GET /events` fills.
    pub(super) async fn local(&self, org_id: Uuid, burst: &[(&str, Value)]) -> u64 {
        let Some(ns) = self.io.of("/") else {
            return 0;
        };
        for socket in ns.local().to(org_room(org_id)).sockets() {
            let give_up = Instant::now() + LOCAL_STALL;
            'burst: for (event, data) in burst {
                loop {
                    match socket.emit(*event, data) {
                        Ok(()) => break,
                        Err(SendError::Socket(SocketError::InternalChannelFull))
                            if Instant::now() < give_up =>
                        {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Err(e) => {
                            tracing::debug!(event, error = %e, "local delivery stopped for a socket");
                            break 'burst;
                        }
                    }
                }
            }
        }
        for (event, _) in burst {
            metrics::counter!("realtime_emits_total", "event" => metric_name(event)).increment(1);
        }
        burst.len() as u64
    }
}

/// Event names as metric labels, from the fixed set only.
fn metric_name(event: &str) -> &'static str {
    event
        .parse::<EventKind>()
        .map_or("other", EventKind::as_str)
}

/// Why an event did not reach the other pods.
#[derive(Debug, thiserror::Error)]
pub(super) enum PublishError {
    /// The Redis adapter refused it.
    #[error("{0}")]
    Adapter(String),
    /// Redis did not answer in time.
    #[error("publish timed out after {PUBLISH_TIMEOUT:?}")]
    TimedOut,
}
