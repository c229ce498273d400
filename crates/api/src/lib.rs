//! Switchboard's HTTP surface and the assembly of one pod: configuration in, a running
//! server with graceful shutdown out.

pub mod auth;
pub mod connection_cache;
mod console;
pub mod error;
pub mod extract;
mod http;
pub mod idempotency;
pub mod lifecycle;
pub mod metrics;
pub mod pod;
pub mod protection;
mod sampler;
pub mod scheduled;
mod serve;
pub mod state;
pub mod telemetry;
pub mod timeouts;

pub use pod::{App, Bound, Server, StartError};
pub use state::AppState;
