//! The binary as operators meet it: the CLI contract (`admin`, `reencrypt`), the production
//! start-up invariants, and graceful shutdown on SIGTERM.

mod admin;
mod invariants;
mod reencrypt;
mod shutdown;
