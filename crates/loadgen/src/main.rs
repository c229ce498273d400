//! `sb-loadgen`: signed Slack webhooks against a URL, every request a new event, for the
//! ingest benchmark (`scripts/bench-ingest.sh`).
//!
//! Each request is signed when it is sent (Slack's v0 scheme), so a run of any length at
//! any rate sends only fresh events: no pre-generated file to run out of and replay as
//! duplicates, which both servers answer without doing the work.
//!
//! - **Open loop** (`--rate R`): request `i` is due at `start + i / R`. Whichever connection
//!   is free takes the next due request, and its latency counts from when it was *due*, so
//!   time a request waits for a free connection behind a slow server counts (no coordinated
//!   omission). Timers tick in milliseconds, so a latency may read up to 1 ms high.
//! - **Closed loop** (`--rate 0`): every connection sends its next request as soon as the
//!   last one is answered, for `--seconds`.
//!
//! Prints one JSON object: counts per status, achieved rate and latency percentiles.
//! `--samples FILE` also writes every request as `due_unix_ms latency_us status`, for a
//! benchmark that takes the percentiles of a window of its own (e.g. while a purge runs).

mod http;

use anyhow::{Context, bail};
use clap::Parser;
use http::Conn;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard_channels::signing::slack_signature;
use tokio::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "Fresh signed Slack webhooks at a fixed rate (open loop) or as fast as answered")]
struct Args {
    /// The Slack webhook URL (http only).
    #[arg(long)]
    url: String,
    /// The connection's Slack signing secret.
    #[arg(long)]
    secret: String,
    /// Requests per second; 0 runs a closed loop.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// How long to send.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Connections kept open.
    #[arg(long, default_value_t = 64)]
    conns: usize,
    /// Distinct customers the events come from (real traffic is many conversations).
    #[arg(long, default_value_t = 1000)]
    users: u64,
    /// Also write every request (`due_unix_ms latency_us status`, one per line) here.
    #[arg(long)]
    samples: Option<std::path::PathBuf>,
}

/// Where requests go, and how they are signed.
struct Target {
    addr: String,
    host: String,
    path: String,
    secret: String,
    /// Makes this run's event ids differ from every other run's.
    tag: String,
    users: u64,
}

impl Target {
    /// Request `i`, signed now.
    fn request(&self, i: u64) -> Vec<u8> {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let ts = i64::try_from(secs).unwrap_or_default();
        let body = serde_json::json!({
            "type": "event_callback", "event_id": format!("Ev{}{i}", self.tag), "team_id": "T1",
            "event": {"type": "message", "user": format!("U{}", i % self.users),
                      "text": format!("hello {i}"), "channel": "C1", "ts": format!("{ts}.{i:06}")},
        })
        .to_string();
        let signature = slack_signature(&self.secret, ts, body.as_bytes());
        format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             X-Slack-Request-Timestamp: {ts}\r\nX-Slack-Signature: {signature}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.path,
            self.host,
            body.len()
        )
        .into_bytes()
    }
}

/// What one connection saw: (latency in µs, status; 0 for a broken connection, when it was
/// due in µs after the start).
type Samples = Vec<(u32, u16, u64)>;

/// Sends requests on one connection until the run is over.
async fn drive(
    target: Arc<Target>,
    next: Arc<AtomicU64>,
    start: Instant,
    rate: f64,
    total: u64,
    until: Instant,
) -> Samples {
    let mut samples = Samples::new();
    let mut conn = None;
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        // Open loop: request i is due at its slot; closed loop: now.
        let due = if rate > 0.0 {
            if i >= total {
                break;
            }
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due).await;
            due
        } else {
            let now = Instant::now();
            if now >= until {
                break;
            }
            now
        };
        let request = target.request(i);
        let status = match &mut conn {
            Some(c) => Conn::round_trip(c, &request).await.ok(),
            None => None,
        };
        let status = match status {
            Some(s) => s,
            // First request, or the connection broke: reconnect and send it (once) anew.
            None => match Conn::open(&target.addr).await {
                Ok(mut c) => {
                    let s = c.round_trip(&request).await.unwrap_or(0);
                    conn = (s != 0).then_some(c);
                    s
                }
                Err(_) => 0,
            },
        };
        let micros = due.elapsed().as_micros().min(u32::MAX as u128) as u32;
        let offset = due.duration_since(start).as_micros() as u64;
        samples.push((micros, status, offset));
    }
    samples
}

fn percentile(sorted: &[u32], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let i = ((p / 100.0) * last as f64).round() as usize;
    Some((sorted[i.min(last)] as f64 / 10.0).round() / 100.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let url = url::Url::parse(&args.url).context("--url")?;
    if url.scheme() != "http" {
        bail!("--url must be http://");
    }
    if args.rate < 0.0 || args.seconds <= 0.0 || args.conns == 0 || args.users == 0 {
        bail!("--rate must be >= 0, --seconds, --conns and --users > 0");
    }
    let host = url.host_str().context("--url has no host")?.to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let target = Arc::new(Target {
        addr: format!("{host}:{port}"),
        host,
        path,
        secret: args.secret,
        tag: format!("{:x}{:x}x", nanos % 0xffff_ffff, std::process::id()),
        users: args.users,
    });
    let total = (args.rate * args.seconds).round() as u64;
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let start_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    let until = start + Duration::from_secs_f64(args.seconds);
    let tasks: Vec<_> = (0..args.conns)
        .map(|_| {
            tokio::spawn(drive(
                target.clone(),
                next.clone(),
                start,
                args.rate,
                total,
                until,
            ))
        })
        .collect();
    let mut samples = Samples::new();
    for task in tasks {
        samples.extend(task.await?);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    if let Some(path) = &args.samples {
        let mut out = String::with_capacity(samples.len() * 24);
        for (micros, status, offset) in &samples {
            out.push_str(&format!(
                "{} {micros} {status}\n",
                start_unix_ms + offset / 1000
            ));
        }
        std::fs::write(path, out).with_context(|| format!("--samples {}", path.display()))?;
    }
    for (_, status, _) in &samples {
        *statuses.entry(status.to_string()).or_default() += 1;
    }
    let ok = statuses.get("200").copied().unwrap_or(0);
    let mut latencies: Vec<u32> = samples.iter().map(|s| s.0).collect();
    latencies.sort_unstable();
    let sent = samples.len() as u64;
    println!(
        "{}",
        serde_json::json!({
            "mode": if args.rate > 0.0 { "open" } else { "closed" },
            "rate": args.rate, "seconds": args.seconds, "conns": args.conns,
            "sent": sent, "ok": ok, "errors": sent - ok, "statuses": statuses,
            // Every request carries a new event id: nothing is a replayed duplicate.
            "fresh_fraction": 1.0,
            "achieved_rps": (sent as f64 / elapsed * 10.0).round() / 10.0,
            "p50_ms": percentile(&latencies, 50.0), "p90_ms": percentile(&latencies, 90.0),
            "p99_ms": percentile(&latencies, 99.0), "max_ms": percentile(&latencies, 100.0),
        })
    );
    Ok(())
}
