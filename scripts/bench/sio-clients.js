#!/usr/bin/env node
// One round of scripts/bench-realtime.sh: N Socket.IO clients (websocket transport only)
// split evenly over the pods, then signed Slack webhooks at a fixed rate, and what the
// sockets received. Everything runs in this one process, so every timestamp comes from
// the same monotonic clock (performance.now()).
//
// Phases
//   1. connect   socket i goes to pod i % pods, at most CONCURRENCY handshakes in flight;
//                a handshake is timed from io() to the `connect` event (websocket upgrade +
//                engine.io open + Socket.IO CONNECT with auth {token}, which the server
//                checks against the JWT and Postgres before joining org:{org_id}).
//   2. memory    VmRSS of each pod before the first socket and after the last one (+settle),
//                divided by the sockets on that pod.
//   3. webhooks  EVENTS signed Slack events (scripts/bench/gen-slack.py, one new customer
//                each) POSTed at RATE/s to one URL. Each webhook's message lands in
//                `messages` with channel_message_id "C1:<event.ts>", so after the run one
//                query maps it to its message_id and conversation_id. That gives an exact
//                match to `message_created {message_id}` and to the job's
//                `queue_item_created|updated {conversation_id}`, whatever the order in which
//                the jobs ran. Latencies are measured from the webhook's HTTP 200.
//
// Configuration comes from the environment (set by scripts/bench-realtime.sh):
//   SIO_PODS (comma-separated base URLs), SIO_POD_PIDS (comma-separated pids, same order),
//   SIO_SOCKETS, SIO_TOKEN, SIO_CONCURRENCY, SIO_WEBHOOK_URL, SIO_SIGNING_SECRET, SIO_EVENTS,
//   SIO_RATE, SIO_SETTLE_S, SIO_GEN (gen-slack.py), SIO_TMP (a scratch dir), DATABASE_URL,
//   SIO_ORG_ID, SIO_NODE_DIR (the directory holding node_modules/socket.io-client).
// Prints JSON lines on stdout (phase connect, memory, latency); progress goes to stderr.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');
const { execFile, execFileSync, fork, spawn } = require('child_process');
const readline = require('readline');
const { performance, monitorEventLoopDelay } = require('perf_hooks');

const { io } = require(require.resolve('socket.io-client', { paths: [process.env.SIO_NODE_DIR || __dirname] }));

const env = (name, fallback) => {
  const v = process.env[name];
  if (v === undefined || v === '') {
    if (fallback === undefined) throw new Error(`${name} is not set`);
    return fallback;
  }
  return v;
};
const PODS = env('SIO_PODS').split(',');
const PIDS = env('SIO_POD_PIDS').split(',').map(Number);
const N = Number(env('SIO_SOCKETS'));
const TOKEN = env('SIO_TOKEN');
const CONCURRENCY = Number(env('SIO_CONCURRENCY', '200'));
const WEBHOOK_URL = env('SIO_WEBHOOK_URL');
const SECRET = env('SIO_SIGNING_SECRET');
const EVENTS = Number(env('SIO_EVENTS', '200'));
const RATE = Number(env('SIO_RATE', '10'));
const SETTLE_S = Number(env('SIO_SETTLE_S', '60'));
const GEN = env('SIO_GEN');
const TMP = env('SIO_TMP');
const DATABASE_URL = env('DATABASE_URL');
const ORG_ID = env('SIO_ORG_ID');
const CONNECT_TIMEOUT_MS = Number(env('SIO_CONNECT_TIMEOUT_MS', '60000'));
// SIO_PROCS > 1 spreads the sockets over that many processes, so that parsing every frame
// of a fan-out is not one process's work: this one (the main process) holds the first
// slice, sends the webhooks and reports; the others (SIO_ROLE=listener, SIO_SLICE=k) hold
// theirs and send what their sockets received to the main one every 250 ms. Times cross
// processes as performance.timeOrigin + performance.now(), the same clock on one machine.
// With SIO_LISTENER_BIN (target/release/sb-sio-listen) every slice is held by that program
// instead, which speaks the same report protocol on its stdout at a fraction of Node's CPU
// per frame; the main process then holds no socket and only sends and reports.
const PROCS = Math.max(1, Number(env('SIO_PROCS', '1')));
const LISTENER_BIN = process.env.SIO_LISTENER_BIN || '';
const ROLE = process.env.SIO_ROLE || 'main';
const SLICE = Number(process.env.SIO_SLICE || '0');
const LO = LISTENER_BIN && ROLE === 'main' ? 0 : Math.floor((SLICE * N) / PROCS);
const HI = LISTENER_BIN && ROLE === 'main' ? 0 : Math.floor(((SLICE + 1) * N) / PROCS);
const CONCURRENCY_HERE = Math.max(1, Math.ceil(CONCURRENCY / PROCS));

const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (msg) => process.stderr.write(`[sio-clients N=${N}${process.env.SIO_SLICE ? ` slice ${process.env.SIO_SLICE}` : ''}] ${msg}\n`);
const round = (x, d = 2) => (x === null || x === undefined || !Number.isFinite(x) ? null : Number(x.toFixed(d)));

function pct(values, p) {
  if (!values.length) return null;
  const s = Float64Array.from(values).sort();
  const i = Math.min(s.length - 1, Math.round((p / 100) * (s.length - 1)));
  return round(s[i]);
}
const summary = (values) => ({
  n: values.length,
  p50_ms: pct(values, 50),
  p90_ms: pct(values, 90),
  p99_ms: pct(values, 99),
  max_ms: pct(values, 100),
});

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : null;
}
// utime + stime of a process, in seconds (clock ticks are 100 Hz on Linux).
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
// CPU seconds the whole machine spent busy (all processes), from /proc/stat.
function machineBusySeconds() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return (total - f[3] - (f[4] || 0)) / 100;
}
function fdLimit(pid) {
  const m = /Max open files\s+(\d+|unlimited)/.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8'));
  return m ? m[1] : null;
}
function metricsGauge(base, name) {
  return new Promise((resolve) => {
    http
      .get(`${base}/metrics`, { timeout: 5000 }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => {
          const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(body);
          resolve(m ? Number(m[1]) : null);
        });
      })
      .on('error', () => resolve(null));
  });
}
function emit(obj) {
  const run = process.env.SIO_RUN || null;
  process.stdout.write(`${JSON.stringify({ bench: 'realtime', run, sockets: N, pods: PODS.length, ...obj })}\n`);
}

// --- what the sockets receive ---------------------------------------------------------------
// One record per event instance: `m|<message_id>` for message_created, `q|<conversation_id>`
// for queue_item_created/updated. `seen` counts each socket once (delivery is at-least-once).
const records = new Map();
let recording = false;
let receivedFrames = 0;
function receive(kind, id, name, socketIndex, pod) {
  receivedFrames++;
  if (!recording || !id) return;
  const t = now();
  const key = `${kind}|${id}`;
  let r = records.get(key);
  if (!r) {
    r = {
      name,
      seen: new Uint8Array(N),
      unique: 0,
      uniqueByPod: new Array(PODS.length).fill(0),
      dups: 0,
      firstByPod: new Array(PODS.length).fill(Infinity),
      lastByPod: new Array(PODS.length).fill(-Infinity),
    };
    records.set(key, r);
  }
  if (r.seen[socketIndex]) {
    r.dups++;
    return;
  }
  r.seen[socketIndex] = 1;
  r.unique++;
  r.uniqueByPod[pod]++;
  if (t < r.firstByPod[pod]) r.firstByPod[pod] = t;
  if (t > r.lastByPod[pod]) r.lastByPod[pod] = t;
}

// What the listener processes last reported, per process: key -> record with absolute times.
const remote = new Map();
const toAbs = (t) => (Number.isFinite(t) ? performance.timeOrigin + t : null);
const fromAbs = (t, none) => (t === null ? none : t - performance.timeOrigin);
// An event instance as every process saw it: counts summed, first and last arrivals merged.
function merged(key) {
  const parts = [records.get(key), ...[...remote.values()].map((m) => m.get(key))].filter(Boolean);
  if (parts.length === 0) return undefined;
  const r = {
    name: parts[0].name,
    unique: 0,
    uniqueByPod: new Array(PODS.length).fill(0),
    dups: 0,
    firstByPod: new Array(PODS.length).fill(Infinity),
    lastByPod: new Array(PODS.length).fill(-Infinity),
  };
  for (const x of parts) {
    r.unique += x.unique;
    r.dups += x.dups;
    for (let p = 0; p < PODS.length; p++) {
      r.uniqueByPod[p] += x.uniqueByPod[p];
      r.firstByPod[p] = Math.min(r.firstByPod[p], x.firstByPod[p]);
      r.lastByPod[p] = Math.max(r.lastByPod[p], x.lastByPod[p]);
    }
  }
  return r;
}

// --- phase 1: connect -------------------------------------------------------------------------
const sockets = new Array(N);
const podOf = (i) => i % PODS.length;
const perPod = PODS.map((_, p) => Array.from({ length: N }, (_, i) => i).filter((i) => podOf(i) === p).length);
let unexpectedDisconnects = 0;
const disconnectReasons = {};
const connectErrors = {};

function connectOne(i) {
  return new Promise((resolve) => {
    const pod = podOf(i);
    const t0 = now();
    const s = io(PODS[pod], {
      path: '/socket.io',
      transports: ['websocket'],
      auth: { token: TOKEN },
      reconnection: false,
      forceNew: true,
      timeout: CONNECT_TIMEOUT_MS,
    });
    sockets[i] = s;
    let settled = false;
    s.once('connect', () => {
      settled = true;
      resolve({ ok: true, ms: now() - t0 });
    });
    s.once('connect_error', (err) => {
      if (settled) return;
      settled = true;
      const msg = String((err && err.message) || err);
      connectErrors[msg] = (connectErrors[msg] || 0) + 1;
      resolve({ ok: false, ms: now() - t0 });
    });
    s.on('disconnect', (reason) => {
      if (stopping) return;
      unexpectedDisconnects++;
      disconnectReasons[reason] = (disconnectReasons[reason] || 0) + 1;
    });
    s.on('message_created', (d) => receive('m', d && d.message_id, 'message_created', i, pod));
    s.on('queue_item_created', (d) => receive('q', d && d.conversation_id, 'queue_item_created', i, pod));
    s.on('queue_item_updated', (d) => receive('q', d && d.conversation_id, 'queue_item_updated', i, pod));
  });
}
let stopping = false;
const remoteConnectedByPod = PODS.map(() => 0);
// The sockets that did connect, in all and per pod: an event is "everywhere" when each of
// them has it.
let target = N;
let targetByPod = perPod.slice();

async function connectAll() {
  const handshakes = [];
  let failed = 0;
  let next = LO;
  const start = now();
  let lastProgress = start;
  async function worker() {
    while (next < HI) {
      const i = next++;
      const r = await connectOne(i);
      if (r.ok) handshakes.push(r.ms);
      else failed++;
      if (now() - lastProgress > 5000) {
        lastProgress = now();
        log(`connected ${handshakes.length}/${N} (${failed} failed) after ${((now() - start) / 1000).toFixed(1)} s`);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY_HERE, HI - LO) }, worker));
  return { totalMs: now() - start, handshakes, failed };
}

// --- phase 3: webhooks ------------------------------------------------------------------------
function postWebhook(agent, url, ts, sig, body) {
  return new Promise((resolve) => {
    const data = Buffer.from(body);
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': data.length,
          'x-slack-request-timestamp': ts,
          'x-slack-signature': sig,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, tAck: now() }));
      },
    );
    req.on('error', () => resolve({ status: 0, tAck: now() }));
    req.end(data);
  });
}

function psql(sql) {
  return new Promise((resolve, reject) => {
    execFile('psql', [DATABASE_URL, '-XAtq', '-F', '\t', '-c', sql], { maxBuffer: 64 << 20 }, (err, out) =>
      err ? reject(err) : resolve(out),
    );
  });
}

async function runWebhooks() {
  const file = path.join(TMP, `realtime-${N}.tsv`);
  // One customer per event, so each event has its own conversation (and queue item).
  execFileSync('python3', [GEN, String(EVENTS), file, SECRET, String(EVENTS)]);
  const lines = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [ts, sig, body] = l.split('\t');
      const e = JSON.parse(body).event;
      return { ts, sig, body, cmid: `${e.channel}:${e.ts}` };
    });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const sends = [];
  recording = true;
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const cpu0 = PIDS.map(cpuSeconds);
  const listenerCpu = () => children.reduce((a, c) => a + cpuSeconds(c.child.pid), 0);
  const listenerCpu0 = listenerCpu();
  const clientCpu0 = process.cpuUsage();
  const busy0 = machineBusySeconds();
  const start = now();
  const inflight = [];
  for (let i = 0; i < lines.length; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - now();
    if (wait > 0) await sleep(wait);
    const l = lines[i];
    const tSend = now();
    inflight.push(
      postWebhook(agent, WEBHOOK_URL, l.ts, l.sig, l.body).then((r) => sends.push({ cmid: l.cmid, tSend, ...r })),
    );
  }
  await Promise.all(inflight);
  const sentAt = now();
  const ok = sends.filter((s) => s.status === 200);
  log(`sent ${sends.length} webhooks (${ok.length} answered 200) in ${((sentAt - start) / 1000).toFixed(1)} s`);

  // Map each webhook to its message and conversation, then wait until every socket has both
  // of its events (or SETTLE_S passes).
  const wanted = new Map(ok.map((s) => [s.cmid, s]));
  const quoted = [...wanted.keys()].map((c) => `'${c.replace(/'/g, "''")}'`).join(',');
  let mapped = new Map();
  const deadline = sentAt + SETTLE_S * 1000;
  let complete = false;
  while (now() < deadline) {
    if (mapped.size < wanted.size && quoted) {
      const out = await psql(
        // Stored ids carry their connection's id first ("<connection>:C1:<ts>").
        `SELECT regexp_replace(channel_message_id, '^[^:]*:', ''), id, conversation_id FROM messages ` +
          `WHERE org_id = '${ORG_ID}' AND channel = 'slack' ` +
          `AND regexp_replace(channel_message_id, '^[^:]*:', '') IN (${quoted})`,
      );
      mapped = new Map(
        out
          .split('\n')
          .filter(Boolean)
          .map((row) => {
            const [cmid, messageId, conversationId] = row.split('\t');
            return [cmid, { messageId, conversationId }];
          }),
      );
    }
    if (mapped.size === wanted.size) {
      complete = [...mapped.values()].every((m) => {
        const a = merged(`m|${m.messageId}`);
        const b = merged(`q|${m.conversationId}`);
        return a && b && a.unique === target && b.unique === target;
      });
      if (complete) break;
    }
    await sleep(250);
  }
  loop.disable();
  const cpu1 = PIDS.map(cpuSeconds);
  const clientCpu = process.cpuUsage(clientCpu0);
  const listenersCpu = listenerCpu() - listenerCpu0;
  const busy = machineBusySeconds() - busy0;
  const elapsed = (now() - start) / 1000;

  const lat = {
    message_created: { first_any: [], first_both_pods: [], all: [], byPodFirst: PODS.map(() => []), byPodAll: PODS.map(() => []) },
    queue_item: { first_any: [], first_both_pods: [], all: [], byPodFirst: PODS.map(() => []), byPodAll: PODS.map(() => []) },
  };
  const missing = { message_created: 0, queue_item: 0 };
  const partial = { message_created: 0, queue_item: 0 };
  let dups = 0;
  const queueNames = {};
  const ack = sends.map((s) => s.tAck - s.tSend);
  const raw = [];
  for (const [cmid, s] of wanted) {
    const m = mapped.get(cmid);
    const row = { cmid, sent_s: round((s.tSend - start) / 1000, 3), ack_ms: round(s.tAck - s.tSend) };
    raw.push(row);
    for (const [label, key] of [
      ['message_created', m && `m|${m.messageId}`],
      ['queue_item', m && `q|${m.conversationId}`],
    ]) {
      const r = key && merged(key);
      if (!r) {
        missing[label]++;
        continue;
      }
      if (label === 'queue_item') queueNames[r.name] = (queueNames[r.name] || 0) + 1;
      row[label] = {
        first_by_pod: r.firstByPod.map((t) => (Number.isFinite(t) ? round(t - s.tAck) : null)),
        all: r.unique === target ? round(Math.max(...r.lastByPod) - s.tAck) : null,
      };
      dups += r.dups;
      const L = lat[label];
      const firsts = r.firstByPod.filter(Number.isFinite);
      L.first_any.push(Math.min(...firsts) - s.tAck);
      if (firsts.length === PODS.length) L.first_both_pods.push(Math.max(...firsts) - s.tAck);
      r.firstByPod.forEach((t, p) => Number.isFinite(t) && L.byPodFirst[p].push(t - s.tAck));
      r.lastByPod.forEach((t, p) => r.uniqueByPod[p] === targetByPod[p] && L.byPodAll[p].push(t - s.tAck));
      if (r.unique === target) L.all.push(Math.max(...r.lastByPod) - s.tAck);
      else partial[label]++;
    }
  }
  const shape = (L) => ({
    first_socket_any_pod: summary(L.first_any),
    first_socket_on_both_pods: summary(L.first_both_pods),
    all_sockets: summary(L.all),
    first_socket_by_pod: Object.fromEntries(PODS.map((u, p) => [u, summary(L.byPodFirst[p])])),
    all_sockets_by_pod: Object.fromEntries(PODS.map((u, p) => [u, summary(L.byPodAll[p])])),
  });
  if (process.env.SIO_RAW) {
    raw.sort((a, b) => a.sent_s - b.sent_s);
    fs.writeFileSync(process.env.SIO_RAW, raw.map((r) => JSON.stringify(r)).join('\n') + '\n');
  }
  return {
    webhook_url: WEBHOOK_URL,
    events: lines.length,
    rate_per_s: RATE,
    webhooks_ok: ok.length,
    webhook_ack: summary(ack),
    mapped_to_messages: mapped.size,
    all_delivered_everywhere: complete,
    wait_after_last_send_s: round((now() - sentAt) / 1000, 1),
    message_created: shape(lat.message_created),
    queue_item: { events: queueNames, ...shape(lat.queue_item) },
    events_with_no_delivery: missing,
    events_missing_some_sockets: partial,
    duplicate_deliveries: dups,
    frames_received: receivedFrames + [...remoteFrames.values()].reduce((a, b) => a + b, 0),
    client_processes: PROCS,
    client_program: LISTENER_BIN ? 'sb-sio-listen' : 'node socket.io-client',
    client_event_loop_delay_ms: {
      p50: round(loop.percentile(50) / 1e6),
      p99: round(loop.percentile(99) / 1e6),
      max: round(loop.max / 1e6),
    },
    // machine_busy counts every process (Postgres, Redis, and anything else running): the
    // part that is neither a pod nor this client is `other`.
    cpu_seconds_during_phase: {
      wall: round(elapsed, 1),
      machine_busy: round(busy, 1),
      client: round((clientCpu.user + clientCpu.system) / 1e6, 1),
      client_listener_processes: round(listenersCpu, 1),
      ...Object.fromEntries(PODS.map((u, p) => [u, round(cpu1[p] - cpu0[p], 1)])),
      other: round(
        busy - (clientCpu.user + clientCpu.system) / 1e6 - listenersCpu - PODS.reduce((a, _, p) => a + cpu1[p] - cpu0[p], 0),
        1,
      ),
    },
  };
}

// --- several client processes -----------------------------------------------------------------
const children = [];
const childConnected = [];
const remoteFrames = new Map();
// Sockets of sb-sio-listen processes that closed before the end.
const remoteDisconnects = new Map();
// A listener's messages (`connected` once, then `records` every 250 ms), whether it is a
// forked Node process (IPC) or sb-sio-listen (JSON lines on its stdout).
function onListenerMessage(k, m, resolve) {
  if (m.type === 'connected') resolve(m);
  if (m.type !== 'records') return;
  remoteFrames.set(k, m.frames);
  if (m.disconnects !== undefined) remoteDisconnects.set(k, m.disconnects);
  const got = new Map();
  for (const [key, x] of m.records) {
    got.set(key, {
      ...x,
      firstByPod: x.firstByPod.map((t) => fromAbs(t, Infinity)),
      lastByPod: x.lastByPod.map((t) => fromAbs(t, -Infinity)),
    });
  }
  remote.set(k, got);
}
function startListeners() {
  const first = LISTENER_BIN ? 0 : 1;
  for (let k = first; k < PROCS; k++) {
    const env = { ...process.env, SIO_ROLE: 'listener', SIO_SLICE: String(k) };
    const child = LISTENER_BIN
      ? spawn(LISTENER_BIN, [], { env, stdio: ['pipe', 'pipe', 'inherit'] })
      : fork(__filename, [], { env, execArgv: process.execArgv });
    const stop = LISTENER_BIN ? () => child.stdin.end('stop\n') : () => child.send({ type: 'stop' });
    children.push({ child, stop });
    childConnected.push(
      new Promise((resolve, reject) => {
        if (LISTENER_BIN) {
          readline.createInterface({ input: child.stdout }).on('line', (line) => onListenerMessage(k + 1, JSON.parse(line), resolve));
        } else {
          child.on('message', (m) => onListenerMessage(k, m, resolve));
        }
        child.on('exit', (code) => reject(new Error(`client process ${k} exited (${code})`)));
      }),
    );
  }
}

// A listener process: connects its slice, then reports what its sockets receive until told
// to stop (or until the main process goes away).
async function listener() {
  process.on('disconnect', () => process.exit(0));
  const c = await connectAll();
  const connectedByPod = PODS.map(() => 0);
  for (let i = LO; i < HI; i++) if (sockets[i] && sockets[i].connected) connectedByPod[podOf(i)]++;
  recording = true;
  process.send({
    type: 'connected',
    connectedByPod,
    failed: c.failed,
    handshakes: c.handshakes,
    errors: connectErrors,
  });
  const report = () =>
    process.send({
      type: 'records',
      frames: receivedFrames,
      records: [...records].map(([key, r]) => [
        key,
        {
          name: r.name,
          unique: r.unique,
          uniqueByPod: r.uniqueByPod,
          dups: r.dups,
          firstByPod: r.firstByPod.map(toAbs),
          lastByPod: r.lastByPod.map(toAbs),
        },
      ]),
    });
  const timer = setInterval(report, 250);
  process.on('message', async (m) => {
    if (m.type !== 'stop') return;
    clearInterval(timer);
    stopping = true;
    for (const s of sockets) if (s) s.disconnect();
    await sleep(500);
    process.exit(0);
  });
}

// --- main -----------------------------------------------------------------------------------
(ROLE === 'listener' ? listener() : (async () => {
  const rssBefore = PIDS.map(rssKiB);
  const cpuBefore = PIDS.map(cpuSeconds);
  const busyBefore = machineBusySeconds();
  const clientCpuBefore = process.cpuUsage();
  const loadavg = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
  log(`connecting ${N} sockets to ${PODS.join(' + ')} (${CONCURRENCY} handshakes in flight, ${PROCS} client processes)`);
  const connectStart = now();
  startListeners();
  const c = await connectAll();
  const others = await Promise.all(childConnected);
  // Until every process has its slice connected, not only this one.
  c.totalMs = now() - connectStart;
  for (const o of others) {
    c.failed += o.failed;
    c.handshakes.push(...o.handshakes);
    for (const [msg, n] of Object.entries(o.errors)) connectErrors[msg] = (connectErrors[msg] || 0) + n;
    o.connectedByPod.forEach((n, p) => (remoteConnectedByPod[p] += n));
  }
  const cpuConnect = PIDS.map((pid, p) => cpuSeconds(pid) - cpuBefore[p]);
  const busyConnect = machineBusySeconds() - busyBefore;
  const clientCpuConnect = process.cpuUsage(clientCpuBefore);
  await sleep(2000); // let the pods settle (buffers, allocator) before reading RSS
  const rssAfter = PIDS.map(rssKiB);
  const gauges = await Promise.all(PODS.map((u) => metricsGauge(u, 'realtime_connected_sockets')));
  targetByPod = PODS.map(
    (_, p) => sockets.filter((s, i) => s && s.connected && podOf(i) === p).length + remoteConnectedByPod[p],
  );
  const connected = targetByPod.reduce((a, b) => a + b, 0);
  target = connected;
  emit({
    phase: 'connect',
    connected,
    failed: c.failed,
    connect_errors: connectErrors,
    concurrency: CONCURRENCY,
    total_s: round(c.totalMs / 1000, 2),
    sockets_per_s: round((c.handshakes.length / c.totalMs) * 1000, 1),
    handshake: summary(c.handshakes),
    cpu_seconds: {
      machine_busy: round(busyConnect, 1),
      client: round((clientCpuConnect.user + clientCpuConnect.system) / 1e6, 1),
      ...Object.fromEntries(PODS.map((u, p) => [u, round(cpuConnect[p], 1)])),
    },
    loadavg_before: loadavg,
    server_gauge_connected_sockets: Object.fromEntries(PODS.map((u, p) => [u, gauges[p]])),
    pod_fd_limit: Object.fromEntries(PODS.map((u, p) => [u, fdLimit(PIDS[p])])),
  });
  emit({
    phase: 'memory',
    by_pod: Object.fromEntries(
      PODS.map((u, p) => [
        u,
        {
          sockets: perPod[p],
          rss_before_kib: rssBefore[p],
          rss_after_kib: rssAfter[p],
          kib_per_socket: round((rssAfter[p] - rssBefore[p]) / perPod[p], 2),
        },
      ]),
    ),
    kib_per_socket_mean: round(
      rssAfter.reduce((a, v, p) => a + v - rssBefore[p], 0) / N,
      2,
    ),
  });
  if (connected < N) log(`only ${connected}/${N} sockets connected; latency covers those`);

  if (EVENTS > 0) {
    log(`sending ${EVENTS} webhooks at ${RATE}/s to ${WEBHOOK_URL}`);
    const w = await runWebhooks();
    emit({
      phase: 'latency',
      measured_from: 'webhook HTTP 200 at the sender',
      unexpected_disconnects: unexpectedDisconnects + [...remoteDisconnects.values()].reduce((a, b) => a + b, 0),
      disconnect_reasons: disconnectReasons,
      rss_after_webhooks_kib: Object.fromEntries(PODS.map((u, p) => [u, rssKiB(PIDS[p])])),
      ...w,
    });
  }
  stopping = true;
  for (const c of children) c.stop();
  for (const s of sockets) if (s) s.disconnect();
  await sleep(1000);
  process.exit(0);
})()).catch((e) => {
  log(`failed: ${e.stack || e}`);
  process.exit(1);
});
