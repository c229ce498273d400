//! Integration tests of the HTTP surface against real Postgres and Redis.
#![allow(clippy::unwrap_used, missing_docs)]

mod auth;
mod connections;
mod errors;
mod health;
mod multi_pod;
