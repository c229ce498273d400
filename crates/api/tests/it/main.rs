//! Integration tests of the HTTP surface against real Postgres and Redis.
#![allow(clippy::unwrap_used, missing_docs)]

mod auth;
mod connections;
mod errors;
mod expert;
mod expert_support;
mod health;
mod inbound;
mod inbound_support;
mod multi_pod;
mod realtime;
mod realtime_replay;
mod realtime_resilience;
mod realtime_support;
mod webhooks;
