//! Pods killed mid-work (a job, a release, a send, an erasure, a scheduled slot, an
//! autopilot hold), the whole deployment through kills, rolling restarts, a Postgres
//! restart and a Redis failover, and the traces two pods export.

mod autopilot_kill;
mod disruption;
mod erasure_kill;
mod kill;
mod outbound_kill;
mod release_kill;
mod scheduler_kill;
mod traces;
