// Helpers of the browser test: the stack's URLs, REST calls, the demo providers, pods and
// the load balancer's runtime API, and a tiny sequential test runner whose closing line is
// `N passed, N failed`.

import { createRequire } from "node:module";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run scripts/test-browser.sh`);
  return value;
};

export const LB = env("SB_LB");
export const POD = { 1: env("SB_POD1"), 2: env("SB_POD2") };
export const DEMO = env("SB_DEMO");
export const ORG = env("SB_ORG");
export const LOAD_ORG = env("SB_LOAD_ORG");
export const PASSWORD = env("SB_PASSWORD");
export const SEED_FILE = env("SB_SEED_FILE");
export const WORK = env("SB_WORK");
export const ARTIFACTS = env("SB_ARTIFACTS");
export const CHROMIUM = env("CHROMIUM");

const modules = createRequire(join(env("SB_NODE_MODULES"), "noop.js"));
export const { chromium } = modules("playwright-core");
export const AXE_SOURCE = readFileSync(modules.resolve("axe-core/axe.min.js"), "utf8");

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value. */
export async function waitFor(what, fn, { timeout = 20_000, every = 200 } = {}) {
  const start = Date.now();
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() - start > timeout) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what}${last instanceof Error ? ` (${last.message})` : ""}`);
    }
    await sleep(every);
  }
}

export async function api(base, method, path, { token, body, headers = {} } = {}) {
  const response = await fetch(base + path, {
    method,
    headers: {
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: response.status, body: json, headers: response.headers };
}

export async function login(email, base = LB) {
  const r = await api(base, "POST", "/auth/login", { body: { email, password: PASSWORD } });
  if (r.status !== 200) throw new Error(`login ${email}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.token;
}

/** Sends a customer message through the demo simulator (signed like the provider does). */
export async function customerWrites(channel, text, customer, target = "lb") {
  const r = await api(DEMO, "POST", "/simulator/send", { body: { channel, text, customer, target } });
  if (r.status !== 200 || r.body.status !== 200) {
    throw new Error(`simulator send ${channel} via ${target}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  return r.body;
}

/** What a fake provider received so far. */
export async function providerCalls(kind) {
  const r = await api(DEMO, "GET", `/api/calls?kind=${kind}`);
  return r.body.calls;
}

/** `realtime_connected_sockets` of one pod. */
export async function socketsOn(pod) {
  const r = await fetch(`${POD[pod]}/metrics`);
  const text = await r.text();
  const line = text.split("\n").find((l) => l.startsWith("realtime_connected_sockets"));
  return line ? Number(line.trim().split(/\s+/).pop()) : 0;
}

/** One command to HAProxy's runtime API (stats socket). */
export function haproxy(command) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(join(WORK, "haproxy.sock"));
    let out = "";
    socket.on("data", (d) => (out += d));
    socket.on("end", () => resolve(out.trim()));
    socket.on("error", reject);
    socket.write(`${command}\n`);
  });
}

export function podPid(pod) {
  return Number(readFileSync(join(WORK, `pod-${pod}.pid`), "utf8").trim());
}

export function startPod(pod) {
  return new Promise((resolve, reject) => {
    execFile(join(WORK, "pod.sh"), [String(pod)], (err) => (err ? reject(err) : resolve()));
  });
}

// --- the runner ---------------------------------------------------------------------------

const tests = [];
export const timings = {};

export function test(name, fn) {
  tests.push({ name, fn });
}

export async function run({ onFailure } = {}) {
  let passed = 0;
  let failed = 0;
  for (const [i, t] of tests.entries()) {
    const start = Date.now();
    try {
      await t.fn();
      passed++;
      console.log(`ok ${i + 1} - ${t.name} (${Date.now() - start} ms)`);
    } catch (e) {
      failed++;
      console.log(`not ok ${i + 1} - ${t.name} (${Date.now() - start} ms)`);
      console.log(`  ${String(e?.stack ?? e).split("\n").slice(0, 6).join("\n  ")}`);
      if (onFailure) await onFailure(t.name).catch(() => {});
    }
  }
  console.log("timings (ms):");
  for (const [k, v] of Object.entries(timings)) console.log(`  ${k}: ${v}`);
  console.log(`${passed} passed, ${failed} failed`);
  return failed;
}
