//! F4 realtime: Socket.IO through the Redis adapter, per-org sequence numbers and replay,
//! Redis outages and restarts, sockets ended with their session, and presence.

mod presence;
mod realtime;
mod realtime_outage;
mod realtime_replay;
mod realtime_resilience;
mod realtime_sessions;
