//! Integration tests of the HTTP surface against real Postgres and Redis, laid out like the
//! spec: a folder per flow (F1 intake, F2 draft, F3 release, F4 realtime), then the team,
//! operations and the deployment's topology. Pods, fakes, data and requests come from
//! `switchboard_testing`; `support` holds what the modules share beyond those.
#![allow(clippy::unwrap_used, missing_docs)]

mod f1_intake;
mod f2_draft;
mod f3_release;
mod f4_realtime;
mod operations;
mod support;
mod team;
mod topology;
