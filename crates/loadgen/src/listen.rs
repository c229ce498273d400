//! `sb-sio-listen`: a slice of the realtime benchmark's Socket.IO clients
//! (`scripts/bench/sio-clients.js`), written to cost the shared machine little.
//!
//! Ten thousand `socket.io-client` sockets in Node spend 200–300 ms of one core parsing a
//! single event's fan-out, on the same two cores as the pods: the client, not the server,
//! set the fan-out latency it measured. This process holds its slice of the sockets on one
//! thread, speaks just enough of Engine.IO v4 / Socket.IO v5 over a websocket (open, CONNECT
//! with the token, answering pings, EVENT frames), and reports to the Node process that
//! drives the round in the same form as that script's Node listeners: JSON lines on stdout,
//! `connected` once, then `records` every 250 ms, with times on the Node clock
//! (`performance.timeOrigin + performance.now()`: wall time at start plus a monotonic
//! clock). A `stop` line on stdin, or its end, closes the sockets and exits.
//!
//! Configuration is the Node script's environment: `SIO_PODS`, `SIO_TOKEN`, `SIO_SOCKETS`,
//! `SIO_PROCS`, `SIO_SLICE`, `SIO_CONCURRENCY`, `SIO_CONNECT_TIMEOUT_MS`. Socket `i` of
//! `floor(k·N/P) .. floor((k+1)·N/P)` connects to pod `i % pods`, as in the Node script.

use anyhow::{Context, anyhow, bail};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{WebSocketStream, client_async};

/// The Node clock: milliseconds since the Unix epoch, read once, advanced by a monotonic
/// clock (as `performance.timeOrigin + performance.now()`).
struct Clock {
    origin_ms: f64,
    start: Instant,
}

impl Clock {
    fn new() -> Self {
        let origin_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(0.0);
        Clock {
            origin_ms,
            start: Instant::now(),
        }
    }

    fn at(&self, t: Instant) -> f64 {
        self.origin_ms + t.duration_since(self.start).as_secs_f64() * 1000.0
    }
}

/// One event instance (`m|<message_id>` or `q|<conversation_id>`) as this slice saw it.
struct Record {
    name: &'static str,
    seen: Vec<bool>,
    unique: u64,
    unique_by_pod: Vec<u64>,
    dups: u64,
    first_by_pod: Vec<Option<Instant>>,
    last_by_pod: Vec<Option<Instant>>,
}

struct Shared {
    pods: usize,
    /// This slice's first socket index, and its number of sockets.
    lo: usize,
    width: usize,
    records: Mutex<HashMap<String, Record>>,
    frames: AtomicU64,
    disconnects: AtomicU64,
}

impl Shared {
    fn receive(&self, key: String, name: &'static str, socket: usize, pod: usize, t: Instant) {
        let slot = socket - self.lo;
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let r = records.entry(key).or_insert_with(|| Record {
            name,
            seen: vec![false; self.width],
            unique: 0,
            unique_by_pod: vec![0; self.pods],
            dups: 0,
            first_by_pod: vec![None; self.pods],
            last_by_pod: vec![None; self.pods],
        });
        if r.seen[slot] {
            r.dups += 1;
            return;
        }
        r.seen[slot] = true;
        r.unique += 1;
        r.unique_by_pod[pod] += 1;
        r.first_by_pod[pod] = Some(r.first_by_pod[pod].map_or(t, |f| f.min(t)));
        r.last_by_pod[pod] = Some(r.last_by_pod[pod].map_or(t, |l| l.max(t)));
    }

    fn report(&self, clock: &Clock) -> Value {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let abs = |v: &[Option<Instant>]| -> Vec<Value> {
            v.iter()
                .map(|t| t.map_or(Value::Null, |t| json!(clock.at(t))))
                .collect()
        };
        let list: Vec<Value> = records
            .iter()
            .map(|(key, r)| {
                json!([key, {
                    "name": r.name,
                    "unique": r.unique,
                    "uniqueByPod": r.unique_by_pod,
                    "dups": r.dups,
                    "firstByPod": abs(&r.first_by_pod),
                    "lastByPod": abs(&r.last_by_pod),
                }])
            })
            .collect();
        json!({
            "type": "records",
            "frames": self.frames.load(Ordering::Relaxed),
            "disconnects": self.disconnects.load(Ordering::Relaxed),
            "records": list,
        })
    }
}

/// What one socket's handshake came to.
enum Handshake {
    Connected(Box<WebSocketStream<TcpStream>>, Duration),
    Failed(String),
}

fn env(name: &str) -> anyhow::Result<String> {
    std::env::var(name).with_context(|| format!("{name} is not set"))
}

fn env_or(name: &str, fallback: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| fallback.to_string())
}

/// `http://host:port` → (`host:port`, `ws://host:port/socket.io/?EIO=4&transport=websocket`).
fn endpoint(base: &str) -> anyhow::Result<(String, String)> {
    let url = url::Url::parse(base).with_context(|| format!("pod URL {base}"))?;
    if url.scheme() != "http" {
        bail!("pod URL {base}: only http is supported");
    }
    let host = url
        .host_str()
        .ok_or_else(|| anyhow!("pod URL {base} has no host"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    Ok((
        format!("{host}:{port}"),
        format!("ws://{host}:{port}/socket.io/?EIO=4&transport=websocket"),
    ))
}

/// Websocket upgrade, Engine.IO open, Socket.IO CONNECT with `{token}`, until the server's
/// CONNECT answer (or its CONNECT_ERROR).
async fn handshake(addr: &str, ws_url: &str, connect: &str) -> Handshake {
    let t0 = Instant::now();
    let attempt = async {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (mut ws, _) = client_async(ws_url, tcp).await.map_err(|e| e.to_string())?;
        let mut sent = false;
        while let Some(msg) = ws.next().await {
            let text = match msg.map_err(|e| e.to_string())? {
                Message::Text(t) => t,
                Message::Close(_) => return Err("closed during the handshake".to_string()),
                _ => continue,
            };
            match text.as_bytes() {
                // Engine.IO open: ask for the default namespace with the token.
                [b'0', ..] if !sent => {
                    ws.send(Message::text(connect))
                        .await
                        .map_err(|e| e.to_string())?;
                    sent = true;
                }
                [b'2', ..] => {
                    ws.send(Message::text("3"))
                        .await
                        .map_err(|e| e.to_string())?;
                }
                [b'4', b'0', ..] => return Ok(ws),
                [b'4', b'4', ..] => {
                    let detail: Value = serde_json::from_str(&text[2..]).unwrap_or(Value::Null);
                    let message = detail
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("connect_error");
                    return Err(message.to_string());
                }
                _ => {}
            }
        }
        Err("closed during the handshake".to_string())
    };
    match attempt.await {
        Ok(ws) => Handshake::Connected(Box::new(ws), t0.elapsed()),
        Err(e) => Handshake::Failed(e),
    }
}

/// Reads one socket until it closes: answers Engine.IO pings, records the events the
/// benchmark matches.
async fn listen(
    mut ws: WebSocketStream<TcpStream>,
    socket: usize,
    pod: usize,
    shared: Arc<Shared>,
) {
    while let Some(Ok(msg)) = ws.next().await {
        let t = Instant::now();
        let Message::Text(text) = msg else { continue };
        shared.frames.fetch_add(1, Ordering::Relaxed);
        match text.as_bytes() {
            [b'2', ..] if ws.send(Message::text("3")).await.is_err() => break,
            [b'2', ..] => {}
            [b'4', b'2', ..] => {
                let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(&text[2..]) else {
                    continue;
                };
                let (kind, field, name) = match parts.first().and_then(Value::as_str) {
                    Some("message_created") => ("m", "message_id", "message_created"),
                    Some("queue_item_created") => ("q", "conversation_id", "queue_item_created"),
                    Some("queue_item_updated") => ("q", "conversation_id", "queue_item_updated"),
                    _ => continue,
                };
                let Some(id) = parts
                    .get(1)
                    .and_then(|d| d.get(field))
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                shared.receive(format!("{kind}|{id}"), name, socket, pod, t);
            }
            [b'1', ..] | [b'4', b'1', ..] => break,
            _ => {}
        }
    }
    shared.disconnects.fetch_add(1, Ordering::Relaxed);
}

fn print_line(value: &Value) {
    println!("{value}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let clock = Clock::new();
    let pods: Vec<(String, String)> = env("SIO_PODS")?
        .split(',')
        .map(endpoint)
        .collect::<anyhow::Result<_>>()?;
    let token = env("SIO_TOKEN")?;
    let n: usize = env("SIO_SOCKETS")?.parse().context("SIO_SOCKETS")?;
    let procs: usize = env_or("SIO_PROCS", "1")
        .parse::<usize>()
        .context("SIO_PROCS")?
        .max(1);
    let slice: usize = env_or("SIO_SLICE", "0").parse().context("SIO_SLICE")?;
    let concurrency: usize = env_or("SIO_CONCURRENCY", "200")
        .parse()
        .context("SIO_CONCURRENCY")?;
    let timeout_ms: u64 = env_or("SIO_CONNECT_TIMEOUT_MS", "60000")
        .parse()
        .context("SIO_CONNECT_TIMEOUT_MS")?;
    if slice >= procs {
        bail!("SIO_SLICE {slice} is not below SIO_PROCS {procs}");
    }
    let (lo, hi) = (slice * n / procs, (slice + 1) * n / procs);
    let shared = Arc::new(Shared {
        pods: pods.len(),
        lo,
        width: hi - lo,
        records: Mutex::new(HashMap::new()),
        frames: AtomicU64::new(0),
        disconnects: AtomicU64::new(0),
    });
    let connect = format!("40{}", json!({ "token": token }));

    // Connect the slice, at most `concurrency / procs` handshakes in flight.
    let gate = Arc::new(Semaphore::new(concurrency.div_ceil(procs).max(1)));
    let mut tasks = Vec::with_capacity(hi - lo);
    for i in lo..hi {
        let (addr, ws_url) = pods[i % pods.len()].clone();
        let (gate, connect) = (gate.clone(), connect.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await;
            let limit = Duration::from_millis(timeout_ms);
            match tokio::time::timeout(limit, handshake(&addr, &ws_url, &connect)).await {
                Ok(h) => h,
                Err(_) => Handshake::Failed("timeout".into()),
            }
        }));
    }
    let mut connected_by_pod = vec![0u64; pods.len()];
    let mut handshakes = Vec::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for (offset, task) in tasks.into_iter().enumerate() {
        let socket = lo + offset;
        let pod = socket % pods.len();
        match task.await {
            Ok(Handshake::Connected(ws, took)) => {
                connected_by_pod[pod] += 1;
                handshakes.push(took.as_secs_f64() * 1000.0);
                tokio::spawn(listen(*ws, socket, pod, shared.clone()));
            }
            Ok(Handshake::Failed(e)) => *errors.entry(e).or_default() += 1,
            Err(e) => *errors.entry(e.to_string()).or_default() += 1,
        }
    }
    let failed: u64 = errors.values().sum();
    print_line(&json!({
        "type": "connected",
        "connectedByPod": connected_by_pod,
        "failed": failed,
        "handshakes": handshakes,
        "errors": errors,
    }));

    // Report every 250 ms until told to stop.
    let reporter = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                print_line(&shared.report(&clock));
            }
        })
    };
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = stdin.next_line().await {
        if line.trim() == "stop" {
            break;
        }
    }
    reporter.abort();
    tokio::io::stdout().flush().await.ok();
    Ok(())
}
