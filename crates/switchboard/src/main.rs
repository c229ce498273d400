//! The `switchboard` binary: `serve`, `migrate` and the `admin` commands (SPEC §9).

mod admin;
mod demo_providers;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::process::ExitCode;
use switchboard_api::{App, StartError, telemetry};

// The webhook path allocates many small, short-lived buffers on several threads; mimalloc
// spends far less time in them than glibc's allocator (see docs/PERFORMANCE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "Human-in-the-loop customer messaging server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one pod: HTTP API, webhooks, Socket.IO and background workers.
    Serve,
    /// Apply pending database migrations and exit.
    Migrate {
        /// Leave alone the applied migrations this binary does not know (a later release's)
        /// instead of refusing to run: for a rollback to the previous release.
        #[arg(
            long,
            env = "MIGRATIONS_IGNORE_MISSING",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        ignore_missing: bool,
    },
    /// Administrative tasks; each prints one JSON object.
    Admin {
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Fake agent and provider APIs plus a customer simulator, for demos and browser tests
    /// (refused in production).
    DemoProviders(demo_providers::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The process-wide TLS provider for outbound HTTPS (providers, Sentry).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match switchboard_config::load() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("switchboard: {e}");
            return ExitCode::from(2);
        }
    };
    let _sentry = telemetry::init_sentry(&config);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchboard: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve(config).await,
            Command::Migrate { ignore_missing } => report(migrate(&config, ignore_missing).await),
            Command::Admin { command } => report(admin::run(&config, command).await),
            Command::DemoProviders(args) => report(demo_providers::run(&config, args).await),
        }
    })
}

/// One pod, step by step (`switchboard_api::pod` has each step's details).
async fn serve(config: switchboard_config::Config) -> ExitCode {
    let tracing = telemetry::init_tracing(&config);
    let code = run_pod(config).await;
    // The spans of the drain itself are the last ones sent.
    if let Some(tracing) = tracing {
        tokio::task::spawn_blocking(move || tracing.shutdown())
            .await
            .ok();
    }
    code
}

/// [`serve`] once the logs and the trace export are set up.
async fn run_pod(config: switchboard_config::Config) -> ExitCode {
    // Checks (production invariants, the connection budget, schedules), pools, state.
    let app = match App::build(config).await {
        Ok(app) => app,
        Err(StartError::Violations(lines)) => {
            for line in lines {
                eprintln!("switchboard: refusing to start: {line}");
            }
            return ExitCode::from(3);
        }
        Err(e) => {
            eprintln!("switchboard: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The API port and `/metrics`: a port conflict fails here, before any job is taken.
    let bound = match app.bind().await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("switchboard: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Realtime relay, queue promoters, inbound and outbound workers, the scheduler with its
    // periodic jobs, the load sampler.
    bound.spawn_background();
    // REST, webhooks, Socket.IO and the console, with the drain armed.
    let server = bound.serve();
    // Until SIGTERM: readiness 503, drain, finish the jobs in hand, close the pools.
    match server.run_until_signal().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchboard: server error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Migrations run on `DATABASE_DIRECT_URL`: sqlx's migrator holds a session lock, which a
/// transaction-mode pooler would not keep.
async fn migrate(config: &switchboard_config::Config, ignore_missing: bool) -> anyhow::Result<()> {
    let pool = switchboard_store::connect_direct(config)
        .await
        .map_err(|e| anyhow::anyhow!("{}", switchboard_store::explain(&e)))
        .context("connecting for migrations (DATABASE_DIRECT_URL, else DATABASE_URL)")?;
    let applied = if ignore_missing {
        switchboard_store::migrate_ignoring_missing(&pool).await
    } else {
        switchboard_store::migrate(&pool).await
    };
    applied
        .map_err(|e| anyhow::anyhow!("{}", switchboard_store::explain(&e)))
        .context("applying migrations")?;
    pool.close().await;
    println!("{}", serde_json::json!({"migrated": true}));
    Ok(())
}

fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchboard: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, each message once: wrapped errors often repeat
/// their source's text in their own, which `{:#}` would print again at every level.
fn one_line(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
