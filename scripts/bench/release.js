// Release benchmark client (scripts/bench-release.sh). Connects one Socket.IO client to
// each pod, then releases the given items at a fixed rate (open loop: a release is sent on
// schedule whether or not earlier ones answered), alternating pods, each with a fresh
// Idempotency-Key. For every release it records the HTTP latency, and the time from the
// request's start to `agent_message_sent` for that item on the socket of the OTHER pod (the
// event crosses pods through Postgres, the relay and Redis).
// With WARM_FILE, its items are released first on the same schedule and the same connections,
// unmeasured, so the measured run starts on a warm client (open connections, compiled code)
// as well as warm pods, and the load does not pause between the two.
// Usage: node release.js POD1_URL POD2_URL TOKEN RATE ITEMS_FILE [WARM_FILE]
//        -> one JSON line on stdout
const { io } = require("socket.io-client");
const fs = require("fs");
const crypto = require("crypto");

const [pod1, pod2, token, rateArg, itemsFile, warmFile] = process.argv.slice(2);
const rate = Number(rateArg);
const readItems = (file) => fs.readFileSync(file, "utf8").split("\n").filter(Boolean);
const items = readItems(itemsFile);
const warm = warmFile ? readItems(warmFile) : [];
const pods = [pod1, pod2];

function connect(url) {
  return new Promise((resolve, reject) => {
    const s = io(url, { transports: ["websocket"], auth: { token }, reconnection: false });
    s.on("connect", () => resolve(s));
    s.on("connect_error", reject);
  });
}

function pct(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

(async () => {
  const sockets = await Promise.all(pods.map(connect));
  const started = new Map(); // item -> { t0, pod }
  const crossPod = [];
  sockets.forEach((sock, i) => {
    sock.on("agent_message_sent", (data) => {
      const s = started.get(data.queue_item_id);
      if (s && s.pod !== i && s.cross === undefined) {
        s.cross = performance.now() - s.t0;
        if (s.measured) crossPod.push(s.cross);
      }
    });
  });
  const http = [];
  let errors = 0;
  let warmErrors = 0;
  // What the measured releases were answered, by status and code ("200", "409 stale_draft",
  // "network"): an error count alone does not say what to fix.
  const statuses = {};
  const count = (key) => (statuses[key] = (statuses[key] ?? 0) + 1);
  const interval = 1000 / rate;
  const start = performance.now();
  const measured = new Set(items);
  // The measured run's clock starts where its first release is due, after the warm-up's.
  const t0 = start + warm.length * interval;
  const inflight = [...warm, ...items].map(
    (item, n) =>
      new Promise((resolve) => {
        const due = start + n * interval;
        setTimeout(async () => {
          const pod = n % 2;
          const begin = performance.now();
          const isMeasured = measured.has(item);
          started.set(item, { t0: begin, pod, measured: isMeasured });
          const fail = () => (isMeasured ? (errors += 1) : (warmErrors += 1));
          try {
            const r = await fetch(`${pods[pod]}/expert-queue/${item}/release`, {
              method: "POST",
              headers: { authorization: `Bearer ${token}`, "idempotency-key": crypto.randomUUID() },
            });
            const text = await r.text();
            if (r.status !== 200) fail();
            if (isMeasured) {
              let code = "";
              try {
                code = r.status === 200 ? "" : ` ${JSON.parse(text).code ?? ""}`;
              } catch {}
              count(`${r.status}${code}`);
            }
            // Latency from when the request was due: a late start counts (no coordinated omission).
            if (isMeasured) http.push(performance.now() - due);
          } catch (e) {
            fail();
            if (isMeasured) count("network");
          }
          resolve();
        }, Math.max(0, due - performance.now()));
      }),
  );
  await Promise.all(inflight);
  const sendSeconds = (performance.now() - t0) / 1000;
  const deadline = performance.now() + 10000;
  while (crossPod.length < items.length - errors && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  sockets.forEach((s) => s.close());
  console.log(
    JSON.stringify({
      releases: items.length,
      rate,
      achieved_rate: +(items.length / sendSeconds).toFixed(1),
      errors,
      statuses,
      warmup_releases: warm.length,
      warmup_errors: warmErrors,
      http_p50_ms: +pct(http, 50).toFixed(1),
      http_p99_ms: +pct(http, 99).toFixed(1),
      socket_events: crossPod.length,
      cross_pod_p50_ms: crossPod.length ? +pct(crossPod, 50).toFixed(1) : null,
      cross_pod_p99_ms: crossPod.length ? +pct(crossPod, 99).toFixed(1) : null,
    }),
  );
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
