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
mod topology;

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

/// `switchboard serve` with `vars` (which set `PORT`), once its `/ready` answers 200 (30 s at
/// most); returns the process and its base URL.
pub async fn serve_ready(vars: &HashMap<String, String>) -> (std::process::Child, String) {
    let child = switchboard(vars, &["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{}", vars["PORT"]);
    let http = switchboard_testing::http();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while http
        .get(format!("{base}/ready"))
        .send()
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{base} never became ready"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    (child, base)
}

/// Runs a command to completion.
pub fn run(vars: &HashMap<String, String>, args: &[&str]) -> Output {
    switchboard(vars, args).output().unwrap()
}
