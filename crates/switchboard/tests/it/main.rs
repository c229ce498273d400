//! Process-level tests of the `switchboard` binary: the CLI contract, production start-up
//! invariants and graceful shutdown on SIGTERM.
#![allow(clippy::unwrap_used, missing_docs)]

mod admin;
mod invariants;
mod kill;
mod outbound_kill;
mod release_kill;
mod scheduler_kill;
mod shutdown;

use std::collections::HashMap;
use std::process::{Command, Output};

/// A `switchboard` command with exactly these environment variables (plus PATH).
pub fn switchboard(vars: &HashMap<String, String>, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CONFIG_DIR", switchboard_testing::config_dir())
        .envs(vars)
        .args(args);
    cmd
}

/// Runs a command to completion.
pub fn run(vars: &HashMap<String, String>, args: &[&str]) -> Output {
    switchboard(vars, args).output().unwrap()
}
