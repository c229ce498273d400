#!/usr/bin/env node
// HTTP and Socket.IO side of scripts/test-docker.sh's smoke test, always through the load
// balancer. Subcommands (each prints one JSON line on stdout and exits non-zero on failure):
//
//   alternate N               N GET /health; both pods answer, in turn (X-Served-By)
//   webhook-socket            an expert's Socket.IO client (websocket, auth {token}) gets
//                             message_created for a signed Slack webhook sent afterwards
//   load RATE SECONDS         signed Slack webhooks at RATE/s for SECONDS (or until SIGTERM),
//                             one new event each; counts answers by status and by pod. With
//                             SMOKE_KILL_FILE (a file the caller writes the epoch ms of a pod
//                             crash into), a request that was in flight at that instant may
//                             fail (its pod died under it; the provider retries it); any
//                             other failure fails the run
//
// Environment: SMOKE_LB (http://127.0.0.1:PORT), SMOKE_SEED (the JSON `switchboard admin
// seed-demo` printed), SMOKE_NODE_DIR (where node_modules/socket.io-client is).
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');

const LB = process.env.SMOKE_LB;
const seed = () => JSON.parse(fs.readFileSync(process.env.SMOKE_SEED, 'utf8'));
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function request(method, path, { headers = {}, body } = {}) {
  return new Promise((resolve) => {
    const url = new URL(path, LB);
    const req = http.request(url, { method, headers, agent, timeout: 10000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode, pod: res.headers['x-served-by'], body: Buffer.concat(chunks).toString() }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ status: 0, error: e.message }));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

let sent = 0;
const runId = `${Date.now().toString(36)}${process.pid}`;

// A Slack message event signed the way Slack signs it (v0 HMAC-SHA256 of "v0:ts:body").
function slackWebhook(text) {
  const slack = seed().channels.slack;
  sent += 1;
  const eventTs = `${Math.floor(Date.now() / 1000)}.${String(sent).padStart(6, '0')}`;
  const body = JSON.stringify({
    type: 'event_callback', event_id: `Ev${runId}${sent}`, team_id: 'T1',
    event: { type: 'message', user: `U${runId}${sent}`, text, ts: eventTs, channel: 'C1' },
  });
  const ts = Math.floor(Date.now() / 1000);
  const sig = crypto.createHmac('sha256', slack.secrets.signing_secret).update(`v0:${ts}:${body}`).digest('hex');
  return request('POST', `/webhooks/slack/${slack.id}`, {
    headers: {
      'content-type': 'application/json',
      'x-slack-request-timestamp': String(ts),
      'x-slack-signature': `v0=${sig}`,
    },
    body,
  });
}

function done(ok, result) {
  console.log(JSON.stringify({ ok, ...result }));
  agent.destroy();
  process.exit(ok ? 0 : 1);
}

async function alternate(n) {
  const pods = [];
  for (let i = 0; i < n; i += 1) {
    const r = await request('GET', '/health');
    if (r.status !== 200) return done(false, { step: 'alternate', status: r.status, error: r.error });
    pods.push(r.pod);
  }
  const distinct = [...new Set(pods)].sort();
  const repeats = pods.filter((p, i) => i > 0 && p === pods[i - 1]).length;
  done(distinct.length === 2 && repeats === 0, { step: 'alternate', pods, distinct, repeats });
}

async function webhookSocket() {
  const { io } = require(require.resolve('socket.io-client', { paths: [process.env.SMOKE_NODE_DIR || __dirname] }));
  const s = seed();
  const login = await request('POST', '/auth/login', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: s.expert.email, password: s.expert.password }),
  });
  if (login.status !== 200) return done(false, { step: 'login', status: login.status, body: login.body });
  const { token } = JSON.parse(login.body);
  // No stickiness at the load balancer, so no long-polling: straight to a websocket.
  const socket = io(LB, { transports: ['websocket'], auth: { token }, reconnection: false, timeout: 10000 });
  const fail = (step, detail) => { socket.close(); done(false, { step, ...detail }); };
  const timer = setTimeout(() => fail('socket event', { error: 'no message_created within 30 s' }), 30000);
  socket.on('connect_error', (e) => fail('socket connect', { error: e.message }));
  const text = `smoke ${runId}`;
  socket.on('message_created', (payload) => {
    if (JSON.stringify(payload).includes(text) || payload.org_id === s.org_id) {
      clearTimeout(timer);
      socket.close();
      done(true, { step: 'webhook-socket', event: 'message_created', org_id: payload.org_id, seq: payload.seq, text });
    }
  });
  socket.on('connect', async () => {
    const r = await slackWebhook(text);
    if (r.status !== 200) fail('webhook', { status: r.status, body: r.body, error: r.error });
  });
}

async function load(rate, seconds) {
  const counts = {};
  const pods = {};
  const failures = [];
  let stop = false;
  process.on('SIGTERM', () => { stop = true; });
  const start = Date.now();
  const inflight = new Set();
  for (let i = 0; !stop && Date.now() - start < seconds * 1000; i += 1) {
    // Open loop: each request leaves at its scheduled time, whatever the others do.
    const due = start + (i * 1000) / rate;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (stop) break;
    const sentAt = Date.now();
    const p = slackWebhook(`load ${i}`).then((r) => {
      counts[r.status] = (counts[r.status] || 0) + 1;
      if (r.pod) pods[r.pod] = (pods[r.pod] || 0) + 1;
      if (r.status !== 200) {
        failures.push({ sent_at: sentAt, done_at: Date.now(), status: r.status, error: r.error, body: (r.body || '').slice(0, 200) });
      }
      inflight.delete(p);
    });
    inflight.add(p);
  }
  await Promise.all(inflight);
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  let killAt = null;
  if (process.env.SMOKE_KILL_FILE && fs.existsSync(process.env.SMOKE_KILL_FILE)) {
    killAt = Number(fs.readFileSync(process.env.SMOKE_KILL_FILE, 'utf8').trim());
  }
  // In flight at the crash: sent before it (the kill command's own latency allowed for) and
  // answered after it.
  const atKill = (f) => killAt !== null && f.sent_at <= killAt + 100 && f.done_at >= killAt;
  const inFlightAtKill = failures.filter(atKill).length;
  const otherFailures = failures.length - inFlightAtKill;
  done(otherFailures === 0, {
    step: 'load', rate, seconds: (Date.now() - start) / 1000, total, accepted: counts[200] || 0,
    failed_in_flight_at_kill: inFlightAtKill, failed_otherwise: otherFailures, counts, pods,
    failures: failures.slice(0, 10).map((f) => ({ ...f, sent_ms: f.sent_at - start, done_ms: f.done_at - start })),
  });
}

const [cmd, a, b] = process.argv.slice(2);
if (!LB) throw new Error('SMOKE_LB is not set');
if (cmd === 'alternate') alternate(Number(a || 10));
else if (cmd === 'webhook-socket') webhookSocket();
else if (cmd === 'load') load(Number(a), Number(b));
else { console.error('usage: smoke.js alternate N | webhook-socket | load RATE SECONDS'); process.exit(2); }
