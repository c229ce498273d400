//! Process-level tests of the `switchboard` binary: `operations` (the CLI contract,
//! production start-up invariants, graceful shutdown on SIGTERM) and `topology` (pods killed
//! mid-work, the deployment under disruption). The helpers below are shared by both.
#![allow(clippy::unwrap_used, missing_docs)]

mod operations;
mod topology;

use std::collections::HashMap;
use std::process::{Child, Command, ExitStatus, Output};
use std::time::Duration;
use switchboard_testing::{Endpoint, TestDb, eventually, free_port, pod_env, redis_url};

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

/// The environment of a pod process on `db` and the shared Redis under `prefix`, on a port
/// of its own (`PORT`).
pub fn process_env(db: &TestDb, prefix: &str) -> HashMap<String, String> {
    let mut vars = pod_env(db, &redis_url(), prefix);
    vars.insert("PORT".into(), free_port().to_string());
    vars
}

/// `switchboard serve` with `vars` (which set `PORT`), once its `/ready` answers 200 (30 s at
/// most); returns the process and a client for it.
pub async fn serve_ready(vars: &HashMap<String, String>) -> (Child, Endpoint) {
    let child = switchboard(vars, &["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pod = Endpoint::new(format!("http://127.0.0.1:{}", vars["PORT"]));
    pod.wait_ready().await;
    (child, pod)
}

/// SIGKILL, and the process reaped.
pub fn sigkill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// SIGTERM, as an orchestrator stops a pod.
pub fn sigterm(child: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Awaits `child`'s exit (`within` at most).
pub async fn exited(child: &mut Child, within: Duration) -> ExitStatus {
    eventually("the process exits", within, || {
        let status = child.try_wait().unwrap();
        async move { status }
    })
    .await
}

/// Runs a command to completion.
pub fn run(vars: &HashMap<String, String>, args: &[&str]) -> Output {
    switchboard(vars, args).output().unwrap()
}
