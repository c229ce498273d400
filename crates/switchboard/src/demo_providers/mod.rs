//! `switchboard demo-providers`: everything outside Switchboard that a laptop demo and the
//! browser test need, in one process. A fake agent (`/agent/v1/chat`, drafts that depend on
//! the message), fake Slack, Twilio, Telegram and Resend APIs that record what they receive
//! (`GET /api/calls`), fake alert sinks (Slack incoming webhook, PagerDuty Events API v2,
//! a Standard Webhooks receiver), and a customer simulator page that sends correctly signed
//! webhooks through the load balancer and shows the replies each channel received and the
//! alerts each sink received.
//!
//! Point the pods at it with `AGENT_URL={url}/agent`, `SLACK_API_BASE={url}/slack/api`,
//! `TWILIO_API_BASE={url}/` + [`whatsapp::PROVIDER`], `TELEGRAM_API_BASE={url}/telegram`,
//! `RESEND_API_BASE={url}/resend` (system mail too, with `MAIL_RESEND_API_KEY`), and the
//! `ALERT_*` sinks as `alerts.rs` says. Refused when `APP_ENV=production`, like `DEMO_MODE`: a
//! production pod must never be wired to fakes, and this process holds no real secrets.

mod agent;
mod alerts;
mod providers;
mod record;
mod simulator;

use anyhow::{Context, bail};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use record::{Fault, Recorder};
use serde::Deserialize;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use switchboard_channels::whatsapp;
use switchboard_config::{AppEnv, Config};
use url::Url;

/// Options of `switchboard demo-providers`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Address to listen on.
    #[arg(long, env = "DEMO_PROVIDERS_BIND", default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// Port to listen on.
    #[arg(long, env = "DEMO_PROVIDERS_PORT", default_value_t = 4010)]
    port: u16,
    /// Where the simulator sends webhooks: the load balancer.
    #[arg(
        long,
        env = "DEMO_SWITCHBOARD_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    switchboard_url: Url,
    /// A pod's own URL, which the simulator can also send to (repeat for each pod).
    #[arg(long = "pod-url")]
    pod_urls: Vec<Url>,
    /// The demo org's connections and secrets, as `switchboard admin seed-demo` prints them.
    #[arg(long, env = "DEMO_SEED_FILE", default_value = ".dev/seed.json")]
    seed: PathBuf,
    /// The Standard Webhooks secret (`whsec_…`) the fake alert webhook verifies with: the
    /// pods' `ALERT_WEBHOOK_SECRET`.
    #[arg(
        long,
        env = "DEMO_ALERT_WEBHOOK_SECRET",
        default_value = alerts::DEFAULT_WEBHOOK_SECRET,
        hide_env_values = true
    )]
    alert_webhook_secret: String,
}

/// Why the seed file (the demo org's connections) cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SeedError {
    /// Not there (yet) or not readable.
    #[error(
        "cannot read the seed file {} ({source}); scripts/dev-up.sh writes it once the pods are up",
        path.display()
    )]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not JSON.
    #[error("the seed file is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
}

/// State shared by the handlers.
#[derive(Clone)]
pub(crate) struct Demo {
    rec: Arc<Recorder>,
    http: reqwest::Client,
    switchboard: Url,
    pods: Arc<Vec<Url>>,
    seed: Arc<PathBuf>,
    /// What `POST /alerts/webhook` verifies signatures with.
    alert_secret: Arc<str>,
}

impl Demo {
    /// The seed file, read now (it may be written after this process started).
    fn seed(&self) -> Result<Value, SeedError> {
        let text = std::fs::read_to_string(self.seed.as_ref()).map_err(|source| {
            SeedError::Unreadable {
                path: self.seed.as_ref().clone(),
                source,
            }
        })?;
        serde_json::from_str(&text).map_err(SeedError::NotJson)
    }
}

/// Runs the demo providers until SIGINT or SIGTERM.
pub async fn run(config: &Config, args: DemoArgs) -> anyhow::Result<()> {
    if config.app.env == AppEnv::Production {
        bail!(
            "demo-providers is refused when APP_ENV=production: it fakes the agent and every provider"
        );
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .context("building the HTTP client")?;
    let demo = Demo {
        rec: Arc::new(Recorder::default()),
        http,
        switchboard: args.switchboard_url,
        pods: Arc::new(args.pod_urls),
        seed: Arc::new(args.seed),
        alert_secret: Arc::from(args.alert_webhook_secret),
    };
    let addr = SocketAddr::new(args.bind, args.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    println!(
        "{}",
        json!({"demo_providers": format!("http://{local}"), "agent_url": format!("http://{local}/agent")})
    );
    axum::serve(listener, router(demo))
        .with_graceful_shutdown(shutdown())
        .await
        .context("serving")?;
    Ok(())
}

fn router(demo: Demo) -> Router {
    Router::new()
        .route("/", get(page_html))
        .route("/simulator.js", get(page_js))
        .route("/simulator.css", get(page_css))
        .route("/simulator/config", get(simulator::config))
        .route("/simulator/send", post(simulator::send))
        .route("/api/calls", get(calls).delete(clear))
        .route("/api/faults", post(set_fault))
        .route("/agent", get(agent::probe))
        .route("/agent/", get(agent::probe))
        .route("/agent/v1/chat", post(agent::chat))
        .route("/slack/api/chat.postMessage", post(providers::slack))
        .route(
            &format!(
                "/{}/2010-04-01/Accounts/{{account}}/Messages.json",
                whatsapp::PROVIDER
            ),
            post(providers::whatsapp),
        )
        .route("/telegram/{bot}/sendMessage", post(providers::telegram))
        .route("/resend/emails", post(providers::resend_send))
        .route(
            "/resend/emails/receiving/{id}",
            get(providers::resend_received),
        )
        .route("/alerts/slack", post(alerts::slack))
        .route("/alerts/pagerduty/v2/enqueue", post(alerts::pagerduty))
        .route("/alerts/webhook", post(alerts::webhook))
        .route("/health", get(|| async { "ok" }))
        .with_state(demo)
}

#[derive(Deserialize)]
struct CallsQuery {
    kind: Option<String>,
    #[serde(default)]
    after: u64,
}

/// `GET /api/calls?kind=&after=`: what the fakes received, oldest first.
async fn calls(State(demo): State<Demo>, Query(q): Query<CallsQuery>) -> Json<Value> {
    let (calls, latest) = demo.rec.calls(q.kind.as_deref(), q.after);
    Json(json!({"calls": calls, "latest": latest}))
}

/// `DELETE /api/calls`: forget the calls and the faults.
async fn clear(State(demo): State<Demo>) -> Json<Value> {
    demo.rec.clear();
    Json(json!({"cleared": true}))
}

/// `POST /api/faults {kind, status, count?}`: the next calls of `kind` answer `status`
/// (`status: 0` clears it).
async fn set_fault(State(demo): State<Demo>, Json(fault): Json<Fault>) -> Json<Value> {
    demo.rec.set_fault(fault.clone());
    Json(json!({"fault": fault}))
}

/// The page's own files; no inline script or style, like the console.
const PAGE_CSP: &str = concat!(
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; ",
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
);

fn page(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(PAGE_CSP),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
}

async fn page_html() -> impl IntoResponse {
    page("text/html; charset=utf-8", include_str!("page/index.html"))
}

async fn page_js() -> impl IntoResponse {
    page(
        "text/javascript; charset=utf-8",
        include_str!("page/simulator.js"),
    )
}

async fn page_css() -> impl IntoResponse {
    page(
        "text/css; charset=utf-8",
        include_str!("page/simulator.css"),
    )
}

async fn shutdown() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
