// The expert console end to end, in headless Chromium: two pods behind a load balancer with
// no stickiness, the demo providers as agent and channel APIs. Started by
// scripts/test-browser.sh, which sets the environment read in lib.mjs.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  ARTIFACTS,
  DEMO,
  AXE_SOURCE,
  CHROMIUM,
  LB,
  LOAD_ORG,
  ORG,
  PASSWORD,
  POD,
  SEED_FILE,
  api,
  chromium,
  customerWrites,
  haproxy,
  login,
  podPid,
  providerCalls,
  run,
  sleep,
  socketsOn,
  startPod,
  test,
  timings,
  waitFor,
} from "./lib.mjs";
import { presenceTests } from "./presence.mjs";
import { teamNotesTests } from "./team-notes.mjs";
import { membersTests } from "./members.mjs";
import { reportsTests } from "./reports.mjs";
import { privacyTests } from "./privacy.mjs";
import { autopilotTests } from "./autopilot.mjs";
import { draftDiffTests } from "./draft-diff.mjs";
import { journeyTests } from "./journey.mjs";

const LOAD_ITEMS = Number(process.env.SB_LOAD_ITEMS ?? 5000);
const nonce = () => Math.random().toString(36).slice(2, 8);

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  // Playwright gives every launch a fresh temporary profile (--user-data-dir).
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

const problems = []; // script errors and CSP violations, from every page
const axeFindings = [];

async function newPage(label, viewport = { width: 1440, height: 900 }) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.on("pageerror", (e) => problems.push(`${label}: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy|Refused to/i.test(m.text())) {
      problems.push(`${label}: ${m.text()}`);
    }
  });
  pages.set(label, page);
  return page;
}
const pages = new Map();

async function logIn(page, base, email) {
  await page.goto(`${base}/`);
  await page.fill("#login-email", email);
  await page.fill("#login-password", PASSWORD);
  const start = Date.now();
  await page.click('button[type="submit"]');
  await page.locator('#link-state[data-state="live"]').waitFor({ timeout: 15_000 });
  return Date.now() - start;
}

const row = (page, text) => page.locator(".vrow", { hasText: text });

/** The page's API requests so far with their durations, e.g. `GET /auth/me 12`. */
async function requestTimes(page) {
  return page.evaluate(() =>
    performance
      .getEntriesByType("resource")
      .filter((e) => e.initiatorType === "fetch")
      .slice(0, 6)
      .map((e) => `${new URL(e.name).pathname}${new URL(e.name).search.slice(0, 28)} ${Math.round(e.duration)}`),
  );
}

async function scan(page, label) {
  await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 3) }));
  });
  const serious = result.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of serious) axeFindings.push(`${label}: [${v.impact}] ${v.id} — ${v.help} @ ${v.nodes.join(", ")}`);
  return { all: result.length, serious: serious.length };
}

// --- set-up: connections for the demo providers' simulator, and the load org's backlog -------

const adminToken = await login("admin@browser.test");
const secrets = {
  slack: { signing_secret: "browser-slack-signing", bot_token: "xoxb-browser" },
  whatsapp: { account_sid: "ACbrowser", auth_token: "browser-twilio-token", from_number: "+15550001111" },
  telegram: { bot_token: "7:browser", secret_token: "browser-telegram-secret" },
  email: { webhook_secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", api_key: "re_browser", from_address: "support@browser.test" },
};
const seed = { org_id: ORG, channels: {} };
for (const [channel, s] of Object.entries(secrets)) {
  const r = await api(LB, "POST", "/channel-connections", {
    token: adminToken,
    body: { org_id: ORG, channel, name: `browser-${channel}`, secrets: s, settings: {} },
  });
  assert.equal(r.status, 201, `creating the ${channel} connection: ${JSON.stringify(r.body)}`);
  seed.channels[channel] = { id: r.body.id, webhook_url: r.body.webhook_url, secrets: s };
}
writeFileSync(SEED_FILE, JSON.stringify(seed, null, 2));

/** Fills the load org with LOAD_ITEMS open items: one Telegram customer each, via webhooks. */
async function seedBacklog() {
  const token = await login("load-admin@browser.test");
  const secret = "load-telegram-secret";
  const c = await api(LB, "POST", "/channel-connections", {
    token,
    body: { org_id: LOAD_ORG, channel: "telegram", name: "load", secrets: { bot_token: "9:load", secret_token: secret }, settings: {} },
  });
  assert.equal(c.status, 201);
  const path = new URL(c.body.webhook_url).pathname;
  const base = Date.now();
  let next = 0;
  const started = Date.now();
  const worker = async () => {
    while (next < LOAD_ITEMS) {
      const i = next++;
      const chat = 5_000_000 + i;
      const body = JSON.stringify({
        update_id: base + i,
        message: {
          message_id: i + 1,
          date: Math.floor(Date.now() / 1000),
          text: `Backlog message ${i}: where is my order?`,
          from: { id: chat, is_bot: false, first_name: `Customer ${String(i).padStart(4, "0")}` },
          chat: { id: chat, type: "private" },
        },
      });
      for (let attempt = 0; ; attempt++) {
        const r = await fetch(POD[(i % 2) + 1] + path, {
          method: "POST",
          headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secret },
          body,
        }).catch((e) => ({ status: 0, e }));
        if (r.status === 200) break;
        if (attempt > 5) throw new Error(`backlog webhook ${i}: ${r.status}`);
        await sleep(200 * (attempt + 1));
      }
    }
  };
  await Promise.all(Array.from({ length: 24 }, worker));
  timings[`backlog: ${LOAD_ITEMS} webhooks accepted`] = Date.now() - started;
  const expert = await login("load-expert@browser.test");
  await waitFor(
    `${LOAD_ITEMS} queue items in the load org`,
    async () => {
      let count = 0;
      let cursor = "";
      for (;;) {
        const r = await api(LB, "GET", `/expert-queue?org_id=${LOAD_ORG}&limit=200${cursor}`, { token: expert });
        count += r.body.items.length;
        if (!r.body.next_cursor) break;
        cursor = `&cursor=${encodeURIComponent(r.body.next_cursor)}`;
      }
      return count >= LOAD_ITEMS;
    },
    { timeout: 600_000, every: 3000 },
  );
  timings[`backlog: ${LOAD_ITEMS} items drafted and queued`] = Date.now() - started;
}

// --- the tests -------------------------------------------------------------------------------

let page1; // expert1, console loaded from pod 1 (its socket is on pod 1)
let page2; // expert2, through the load balancer
const tag = {};

test("log in: the login screen is interactive in under 1 s, the queue goes live", async () => {
  page1 = await newPage("expert1@pod-1");
  const response = await page1.goto(`${POD[1]}/`);
  const csp = response.headers()["content-security-policy"] ?? "";
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  await page1.locator("#login-email").waitFor();
  const interactive = await page1.evaluate(() => performance.getEntriesByName("sb-interactive")[0]?.startTime);
  const loaded = await page1.evaluate(() => performance.getEntriesByType("navigation")[0].loadEventEnd);
  timings["login screen interactive (from navigation start)"] = Math.round(interactive);
  timings["login screen load event"] = Math.round(loaded);
  assert.ok(interactive < 1000, `interactive after ${interactive} ms`);
  await page1.fill("#login-email", "expert1@browser.test");
  await page1.fill("#login-password", PASSWORD);
  const start = Date.now();
  await page1.click('button[type="submit"]');
  await page1.locator('#link-state[data-state="live"]').waitFor({ timeout: 15_000 });
  timings["log in → queue live"] = Date.now() - start;
  assert.equal(await page1.locator('.tab[aria-pressed="true"]').getAttribute("data-tab"), "pending");
});

test("a webhook sent to pod 2 appears live on a console connected to pod 1", async () => {
  assert.equal(await socketsOn(1), 1, "the console's socket is on pod 1");
  assert.equal(await socketsOn(2), 0);
  await page1.evaluate(() => {
    window.__sameDocument = true;
  });
  tag.grace = nonce();
  const start = Date.now();
  const sent = await customerWrites("slack", `Where is my order #1042? [${tag.grace}]`, "Grace Hopper", "pod-2");
  assert.ok(sent.sent_to.startsWith(POD[2]), sent.sent_to);
  await row(page1, tag.grace).waitFor({ timeout: 20_000 });
  timings["webhook on pod 2 → row on the pod-1 console"] = Date.now() - start;
  assert.equal(await page1.evaluate(() => window.__sameDocument), true, "the page was not reloaded");
});

test("edit the draft and release: the provider gets the edited text once, the message shows sent", async () => {
  await row(page1, tag.grace).click();
  await waitFor("the agent's draft in the composer", async () => (await page1.inputValue("#composer")).includes("order"));
  assert.match(await page1.textContent("#draft-info"), /confidence \d+%/);
  await page1.click('[data-action="claim"]');
  await page1.locator("#detail-status", { hasText: "Claimed" }).waitFor();
  const edited = `Your order #1042 ships tomorrow morning. Thanks for waiting! [${tag.grace}]`;
  await page1.fill("#composer", edited);
  assert.equal(await page1.textContent('[data-action="release"]'), "Release edited");
  const start = Date.now();
  await page1.click('[data-action="release"]');
  await waitFor("the fake Slack API to receive the edited reply", async () =>
    (await providerCalls("slack")).some((c) => c.text === edited),
  );
  timings["release → provider call"] = Date.now() - start;
  const bubble = page1.locator(".msg.out", { hasText: edited });
  await bubble.waitFor();
  await page1.locator("#detail-status", { hasText: "Awaiting customer" }).waitFor();
  await waitFor(
    'delivery "sent" on the released message (live, via message_status_updated)',
    async () => (await bubble.getAttribute("data-delivery")) === "sent",
    { timeout: 30_000 },
  );
  timings["release → sent on screen"] = Date.now() - start;
  await sleep(2000);
  const calls = (await providerCalls("slack")).filter((c) => c.text === edited);
  assert.equal(calls.length, 1, "exactly one provider call");
});

test("double-click release sends one reply", async () => {
  tag.linus = nonce();
  await customerWrites("telegram", `Hi, I would like a refund please [${tag.linus}]`, "Linus", "lb");
  await row(page1, tag.linus).waitFor({ timeout: 20_000 });
  await row(page1, tag.linus).click();
  await waitFor("the refund draft", async () => (await page1.inputValue("#composer")).includes("refund"));
  const draft = await page1.inputValue("#composer");
  await page1.dblclick('[data-action="release"]');
  await waitFor("the fake Telegram API to receive the reply", async () =>
    (await providerCalls("telegram")).some((c) => c.text === draft),
  );
  await sleep(3000);
  assert.equal((await providerCalls("telegram")).filter((c) => c.text === draft).length, 1, "one provider call");
  assert.equal(await page1.locator(".msg.out", { hasText: draft }).count(), 1, "one outbound message");
});

test("an item that changed since the expert looked is not sent: the console says what changed", async () => {
  tag.ada = nonce();
  await customerWrites("slack", `Where is my parcel? [${tag.ada}]`, "Ada Lovelace");
  await row(page1, tag.ada).waitFor({ timeout: 20_000 });
  // A console whose live feed is cut once it shows the item: the item then changes on the
  // server without it hearing.
  const stale = await newPage("stale");
  let cut = false;
  await stale.routeWebSocket(/socket\.io/, (ws) => {
    const server = ws.connectToServer();
    server.onMessage((message) => {
      if (!cut) ws.send(message);
    });
  });
  await logIn(stale, LB, "expert1@browser.test");
  await row(stale, tag.ada).click();
  await waitFor("the draft in the stale console", async () => (await stale.inputValue("#composer")).length > 0);
  cut = true;
  const seen = await stale.inputValue("#composer");
  await customerWrites("slack", `Actually, send it to my office [${tag.ada}]`, "Ada Lovelace");
  // The live console sees the new message; the stale one does not.
  await row(page1, "send it to my office").waitFor({ timeout: 20_000 });
  await stale.click('[data-action="release"]');
  await stale.locator("#detail-banner", { hasText: "Nothing was sent" }).waitFor({ timeout: 10_000 });
  assert.match(await stale.textContent("#detail-banner"), /the customer wrote again/);
  await sleep(1000);
  assert.equal((await providerCalls("slack")).filter((c) => c.text === seen).length, 0, "nothing sent");
  console.log(`  412 explanation: ${await stale.textContent("#detail-banner")}`);
  await stale.context().close();
  pages.delete("stale");
});

test("the customer simulator: a customer writes there, the expert answers in the console, the page shows the reply", async () => {
  const sim = await newPage("simulator");
  await sim.goto(`${DEMO}/`);
  await sim.locator('#channel option[value="telegram"]').waitFor({ state: "attached" });
  await sim.selectOption("#channel", "telegram");
  tag.sim = nonce();
  await sim.fill("#customer", "Hedy Lamarr");
  await sim.fill("#text", `Hello from the simulator: where is my order? [${tag.sim}]`);
  await sim.click('#send button[type="submit"]');
  await sim.locator("#result", { hasText: "answered 200" }).waitFor();
  await row(page1, tag.sim).waitFor({ timeout: 20_000 });
  await row(page1, tag.sim).click();
  await waitFor("the draft", async () => (await page1.inputValue("#composer")).includes("order"));
  const draft = await page1.inputValue("#composer");
  await page1.click('[data-action="release"]');
  await sim.locator('[data-channel="telegram"] li', { hasText: draft }).waitFor({ timeout: 20_000 });
  await sim.screenshot({ path: join(ARTIFACTS, "demo-simulator.png") });
  await scan(sim, "customer simulator");
  await sim.context().close();
  pages.delete("simulator");
});

test("a long conversation loads older messages on scroll; the expert answers in their own words", async () => {
  tag.long = nonce();
  const total = 34;
  for (let i = 1; i <= total; i++) {
    await customerWrites("telegram", `Message ${i} of a long chat [${tag.long}]`, "Grace Long");
  }
  const token = await login("expert1@browser.test");
  const conversation = await waitFor(`all ${total} messages stored`, async () => {
    const list = await api(LB, "GET", `/expert-queue?org_id=${ORG}&status=pending&limit=200`, { token });
    const item = list.body.items.find((i) => i.last_message?.preview.includes(tag.long));
    if (!item) return null;
    const c = await api(LB, "GET", `/conversations/${item.conversation_id}?limit=100`, { token });
    return c.body.messages.length >= total ? c.body : null;
  }, { timeout: 60_000 });
  await row(page1, tag.long).click();
  await page1.locator(`#detail-title`, { hasText: "Grace Long" }).waitFor();
  await waitFor("the newest page of messages", async () => (await page1.locator(".msg.in").count()) === 30);
  await page1.locator(".history").evaluate((el) => {
    el.scrollTop = 0;
  });
  await waitFor("older messages after scrolling up", async () => (await page1.locator(".msg.in").count()) === total);
  // Jobs run concurrently, so stored order may differ from sending order; all are there.
  const shown = (await page1.locator(".msg.in .msg-body").allTextContents()).join("\n");
  for (let i = 1; i <= total; i++) assert.ok(shown.includes(`Message ${i} of a long chat`), `message ${i} is shown`);
  assert.equal(conversation.messages.length, total);
  // Their own words instead of the draft: respond.
  await page1.click('[data-action="mode"]');
  assert.equal(await page1.inputValue("#composer"), "");
  const own = `Sorry for the wait, I am reading all of it now. [${tag.long}]`;
  await page1.fill("#composer", own);
  assert.equal(await page1.textContent('[data-action="respond"]'), "Send reply");
  await page1.click('[data-action="respond"]');
  await waitFor("the fake Telegram API to receive the expert's reply", async () =>
    (await providerCalls("telegram")).some((c) => c.text === own),
  );
  await page1.locator(".msg.out", { hasText: own }).locator(".who", { hasText: "You" }).waitFor();
});

test("a second console sees the first one's claim live and gets the 409 explanation", async () => {
  page2 = await newPage("expert2@lb");
  await logIn(page2, LB, "expert2@browser.test");
  // Every open item, so a claimed one stays in view (it leaves the Pending tab).
  await page2.click('.tab[data-tab="open"]');
  tag.margaret = nonce();
  await customerWrites("whatsapp", `My package arrived damaged [${tag.margaret}]`, "Margaret Hamilton");
  await row(page1, tag.margaret).waitFor({ timeout: 20_000 });
  await row(page2, tag.margaret).waitFor({ timeout: 20_000 });
  await row(page2, tag.margaret).click();
  await page2.locator("#detail-status", { hasText: "Pending" }).waitFor();
  await row(page1, tag.margaret).click();
  await page1.locator("#composer").waitFor();
  await page1.click('[data-action="claim"]');
  await page1.locator("#detail-status", { hasText: "Claimed" }).waitFor();
  // The second console learns it live: the status, the holder, the row's chip.
  await page2.locator("#detail-status", { hasText: "Claimed" }).waitFor({ timeout: 10_000 });
  assert.match(await page2.textContent("#detail-holder"), /another expert/);
  await row(page2, tag.margaret).locator(".chip", { hasText: "Claimed · another expert" }).waitFor();
  await page2.click('[data-action="claim"]');
  await page2.locator("#detail-banner", { hasText: "claimed by another expert" }).waitFor();
  tag.conflict = await page2.textContent("#detail-banner");
  await page2.click('[data-action="release"]');
  await page2.locator("#detail-banner", { hasText: "Could not release this item: it is claimed by another expert" }).waitFor();
  console.log(`  409 explanation: ${await page2.textContent("#detail-banner")}`);
});

test("keyboard only: move, open, claim, edit, release, snooze, reopen, resolve", async () => {
  tag.alan = nonce();
  await customerWrites("email", `How do I reset my password? [${tag.alan}]`, "Alan Turing");
  await page1.keyboard.press("Escape");
  await page1.waitForFunction(() => location.hash === "#/queue");
  await row(page1, tag.alan).waitFor({ timeout: 20_000 });
  // The list has the focus, visibly.
  assert.equal(await page1.evaluate(() => document.activeElement?.getAttribute("role")), "listbox");
  await page1.keyboard.press("End");
  await page1.keyboard.press("k");
  await page1.keyboard.press("j");
  assert.ok(await page1.evaluate(() => {
    const el = document.activeElement;
    return el.matches(":focus-visible") && getComputedStyle(el).outlineStyle !== "none";
  }), "visible focus on the list");
  assert.match(await page1.locator('.vrow[aria-selected="true"]').textContent(), new RegExp(tag.alan));
  await page1.keyboard.press("Enter");
  await page1.locator("#detail-title", { hasText: "Alan Turing" }).waitFor();
  await waitFor("the draft", async () => (await page1.inputValue("#composer")).length > 0);
  await page1.keyboard.press("c");
  await page1.locator("#detail-status", { hasText: "Claimed" }).waitFor();
  await page1.keyboard.press("e");
  assert.equal(await page1.evaluate(() => document.activeElement?.id), "composer");
  const reply = `Use "Forgot password" on the sign-in page. [${tag.alan}]`;
  await page1.keyboard.press("Control+A");
  await page1.keyboard.type(reply);
  await page1.keyboard.press("Control+Enter");
  await page1.locator("#detail-status", { hasText: "Awaiting customer" }).waitFor();
  await waitFor("the fake Resend API to receive the email", async () =>
    (await providerCalls("email")).some((c) => c.text === reply && c.idempotency_key),
  );
  await page1.keyboard.press("s");
  assert.equal(await page1.evaluate(() => document.activeElement?.id), "snooze-until");
  await page1.keyboard.press("Enter");
  await page1.locator("#detail-status", { hasText: "Snoozed" }).waitFor();
  await page1.keyboard.press("o");
  await page1.locator("#detail-status", { hasText: "Pending" }).waitFor();
  await page1.keyboard.press("x");
  await page1.locator("#detail-status", { hasText: "Resolved" }).waitFor();
});

test("a shortcut pressed on the state an action left acts, even when its event beat its answer", async () => {
  tag.ada = nonce();
  await customerWrites("slack", `Can I change the delivery address? [${tag.ada}]`, "Ada Lovelace");
  await page1.keyboard.press("Escape");
  await page1.waitForFunction(() => location.hash === "#/queue");
  await row(page1, tag.ada).waitFor({ timeout: 20_000 });
  await row(page1, tag.ada).click();
  await page1.locator("#detail-status", { hasText: "Pending" }).waitFor();
  // The claim's answer reaches the page a second late, so its queue_item_updated event is
  // there first, as on a loaded machine. The state on screen must be one the shortcuts act on.
  const claim = /\/expert-queue\/[^/]+\/claim$/;
  await page1.route(claim, async (route) => {
    const response = await route.fetch();
    await sleep(1000);
    await route.fulfill({ response });
  });
  try {
    await page1.keyboard.press("c");
    await page1.locator("#detail-status", { hasText: "Claimed" }).waitFor();
    await page1.keyboard.press("x");
    await page1.locator("#detail-status", { hasText: "Resolved" }).waitFor();
  } finally {
    await page1.unroute(claim);
  }
});

test("a refused session goes back to the login screen with the reason; log out", async () => {
  const page = await newPage("expired");
  await page.goto(`${LB}/`);
  await page.evaluate((org) => {
    localStorage.setItem(
      "switchboard.session",
      JSON.stringify({
        token: "not.a.valid-token",
        expiresAt: new Date(Date.now() + 3600_000).toISOString(),
        user: { id: "00000000-0000-0000-0000-000000000000", email: "ghost@browser.test", display_name: null },
        orgs: [{ org_id: org, role: "expert" }],
        orgId: org,
      }),
    );
  }, ORG);
  await page.reload();
  await page.locator("#login-reason").waitFor({ timeout: 10_000 });
  assert.match(await page.textContent("#login-reason"), /session|refused/i);
  await logIn(page, LB, "expert1@browser.test");
  await page.click("#logout");
  await page.locator("#login-reason", { hasText: "logged out" }).waitFor();
  await scan(page, "login screen");
  await page.context().close();
  pages.delete("expired");
});

test("admin screens: a failed reply in dead letters and its retry; connections; inbound events", async () => {
  const page = await newPage("admin@lb");
  // An admin's console asks for the open alerts (views/alerts.ts) and keeps a live region for them.
  const alertsAsked = page.waitForResponse((r) => new URL(r.url()).pathname === "/alerts", { timeout: 15_000 });
  await logIn(page, LB, "admin@browser.test");
  const alertsAnswer = await alertsAsked;
  assert.equal(new URL(alertsAnswer.url()).search, "?status=open");
  assert.equal(alertsAnswer.status(), 200);
  const open = (await alertsAnswer.json()).alerts.length;
  await page.locator('#alerts-banner[role="status"][aria-live="polite"]').waitFor({ state: "attached" });
  await waitFor(`${open} open alert(s) in the banner`, async () => (await page.locator("#alerts-banner li.alert-line").count()) === open);
  console.log(`  open alerts: ${open}`);
  // Slack refuses the next reply: it fails on the message, live, and lands in dead letters.
  await api(DEMO, "POST", "/api/faults", { body: { kind: "slack", status: 400, count: 1 } });
  tag.dl = nonce();
  await customerWrites("slack", `Please call me back [${tag.dl}]`, "Annie Easley");
  await page1.keyboard.press("Escape");
  await row(page1, tag.dl).waitFor({ timeout: 20_000 });
  await row(page1, tag.dl).click();
  await waitFor("the draft", async () => (await page1.inputValue("#composer")).length > 0);
  const draft = await page1.inputValue("#composer");
  await page1.click('[data-action="release"]');
  const bubble = page1.locator(".msg.out", { hasText: draft });
  await waitFor('delivery "failed" on the message', async () => (await bubble.getAttribute("data-delivery")) === "failed", { timeout: 30_000 });
  console.log(`  failed delivery shows: ${(await bubble.locator(".delivery").textContent()).trim()}`);
  await page.click('nav a[data-page="admin/dead-letters"]');
  await page.locator(".status-line").filter({ hasText: /dead letter|does not offer/ }).waitFor();
  const retry = page.locator("table.grid tbody tr", { hasText: "queued" }).locator("button", { hasText: "Retry now" });
  if ((await page.textContent(".status-line")).includes("does not offer")) {
    console.log("  dead letters: not offered by this server (404)");
  } else {
    await retry.first().waitFor({ timeout: 10_000 });
    console.log(`  dead letter: ${(await page.locator("table.grid tbody tr").first().locator(".why").textContent()).trim()}`);
    await scan(page, "admin: dead letters");
    await retry.first().click();
    await page.locator(".status-line", { hasText: "Retry queued" }).waitFor();
    await waitFor('delivery "sent" after the retry', async () => (await bubble.getAttribute("data-delivery")) === "sent", { timeout: 30_000 });
    assert.equal((await providerCalls("slack")).filter((c) => c.text === draft && c.status === 200).length, 1);
  }
  await page.click('nav a[data-page="admin/connections"]');
  for (const channel of Object.keys(secrets)) await page.locator("tr", { hasText: `browser-${channel}` }).waitFor();
  await page.selectOption("#conn-channel", "telegram");
  await page.fill("#conn-name", "added-in-browser");
  await page.fill("#secret-bot_token", "8:added");
  await page.fill("#secret-secret_token", "added-secret-token");
  await page.click('form.admin-form button[type="submit"]');
  const url = await page.locator(".created code.webhook").textContent();
  assert.match(url, /\/webhooks\/telegram\/[0-9a-f-]{36}$/);
  const added = page.locator("tr", { hasText: "added-in-browser" });
  await added.waitFor();
  await scan(page, "admin: connections");
  await added.locator("button.danger").click();
  await added.locator("button.danger", { hasText: "Confirm delete" }).click();
  await added.waitFor({ state: "detached" });
  await page.click('nav a[data-page="admin/inbound"]');
  await page.locator("#ib-status").waitFor();
  await page.selectOption("#ib-status", "");
  await page.locator("table.grid:has(caption:text('Inbound events')) tbody tr, .status-line:has-text('does not offer')").first().waitFor();
  console.log(`  inbound events: ${await page.textContent(".status-line")}`);
  if ((await page.locator("table.grid tbody tr").count()) > 0) {
    const first = page.locator("table.grid tbody tr").first();
    await first.locator("button", { hasText: "Inspect" }).click();
    await page.locator("pre.payload").waitFor();
    await first.locator("button", { hasText: "Replay" }).click();
    await page.locator(".status-line").filter({ hasText: /Replay queued|Could not replay/ }).waitFor();
    console.log(`  replay: ${await page.textContent(".status-line")}`);
  }
  await scan(page, "admin: inbound events");
  await page.context().close();
  pages.delete("admin@lb");
});

presenceTests({ newPage, logIn, scan, row, nonce, pages });

test("screenshots of the queue and of a conversation", async () => {
  // A few more customers, one of them with a failing agent (a flagged fallback draft).
  tag.more = nonce();
  await customerWrites("whatsapp", `Do you ship to Canada? #fail [${tag.more}]`, "Katherine Johnson");
  await customerWrites("telegram", `Hello! What does the pro plan cost? [${tag.more}]`, "Dennis Ritchie");
  await customerWrites("email", `The invoice for March is missing [${tag.more}]`, "Barbara Liskov");
  await customerWrites("slack", `hey, the app logs me out every hour [${tag.more}]`, "Ada Lovelace");
  await page1.keyboard.press("Escape");
  await page1.click('.tab[data-tab="open"]');
  await waitFor("the new rows", async () => (await row(page1, tag.more).count()) === 4, { timeout: 30_000 });
  const fallback = row(page1, "Do you ship to Canada");
  await fallback.locator(".flag").waitFor();
  await page1.mouse.move(0, 0);
  await page1.screenshot({ path: join(ARTIFACTS, "console-queue.png") });
  await row(page1, tag.grace).click();
  await page1.locator(".msg.out").first().waitFor();
  await page1.screenshot({ path: join(ARTIFACTS, "console-conversation.png") });
  await fallback.click();
  await page1.locator("#draft-fallback").waitFor();
  await page1.screenshot({ path: join(ARTIFACTS, "console-fallback-draft.png") });
  await scan(page1, "queue with a conversation open");
});

test(`${LOAD_ITEMS} items: the first screen is quick, only visible rows are rendered, scrolling is smooth`, async () => {
  // Seeded here rather than in the background: the pods have two cores to share.
  await seedBacklog();
  const page = await newPage("load-expert@lb");
  await page.goto(`${LB}/`);
  await page.fill("#login-email", "load-expert@browser.test");
  await page.fill("#login-password", PASSWORD);
  const start = Date.now();
  await page.click('button[type="submit"]');
  await page.locator(".vrow").first().waitFor({ timeout: 10_000 });
  timings[`${LOAD_ITEMS} items: log in (password check included) → first rows`] = Date.now() - start;
  timings[`${LOAD_ITEMS} items: requests of the log-in`] = (await requestTimes(page)).join(", ");
  await page.locator('.tab[data-tab="pending"] .count', { hasText: new RegExp(`^${LOAD_ITEMS}$`) }).waitFor({ timeout: 30_000 });
  timings[`${LOAD_ITEMS} items: log in → all counted`] = Date.now() - start;
  // The first screen of an expert who is logged in: open the console, see the queue.
  await page.reload();
  await page.locator(".vrow").first().waitFor({ timeout: 10_000 });
  const firstScreen = await page.evaluate(() => performance.getEntriesByName("sb-first-rows")[0]?.startTime);
  timings[`${LOAD_ITEMS} items: open the console (logged in) → first rows, from navigation start`] = Math.round(firstScreen);
  timings[`${LOAD_ITEMS} items: requests of the first screen`] = (await requestTimes(page)).join(", ");
  assert.ok(firstScreen < 1000, `first rows ${firstScreen} ms after navigation start`);
  await page.locator('.tab[data-tab="pending"] .count', { hasText: new RegExp(`^${LOAD_ITEMS}$`) }).waitFor({ timeout: 30_000 });
  const rendered = await page.locator(".vrow").count();
  assert.ok(rendered < 60, `${rendered} rows in the DOM`);
  const scroll = await page.evaluate(async () => {
    const list = document.querySelector(".vlist");
    const deltas = [];
    let maxRows = 0;
    let last = performance.now();
    while (list.scrollTop + list.clientHeight < list.scrollHeight - 1) {
      list.scrollTop += 900;
      await new Promise((r) => requestAnimationFrame(() => r()));
      const now = performance.now();
      deltas.push(now - last);
      last = now;
      maxRows = Math.max(maxRows, list.querySelectorAll(".vrow").length);
    }
    deltas.sort((a, b) => a - b);
    return {
      frames: deltas.length,
      p50: Math.round(deltas[Math.floor(deltas.length / 2)]),
      p95: Math.round(deltas[Math.floor(deltas.length * 0.95)]),
      max: Math.round(deltas[deltas.length - 1]),
      maxRows,
    };
  });
  timings[`${LOAD_ITEMS} items: scroll top→bottom`] = `${scroll.frames} frames, frame p50 ${scroll.p50} / p95 ${scroll.p95} / max ${scroll.max} ms, at most ${scroll.maxRows} rows in the DOM`;
  assert.ok(scroll.maxRows < 60, `${scroll.maxRows} rows rendered while scrolling`);
  assert.ok(scroll.p95 < 100, `frame p95 ${scroll.p95} ms`);
  await page.locator(".vlist").focus();
  await page.keyboard.press("End");
  await page.locator(`.vrow[aria-posinset="${LOAD_ITEMS}"][aria-selected="true"]`).waitFor();
  await page.keyboard.press("Home");
  await page.locator('.vrow[aria-posinset="1"][aria-selected="true"]').waitFor();
  await page.context().close();
  pages.delete("load-expert@lb");
});

teamNotesTests({ newPage, logIn, scan, row, nonce, pages });

test("kill the pod the console is connected to: it shows the loss, reconnects through the LB and catches up", async () => {
  for (const [label, page] of pages) {
    if (page === page2) continue;
    await page.context().close();
    pages.delete(label);
  }
  // page2 (through the load balancer) is now the only console.
  const on = await waitFor("one socket on exactly one pod", async () => {
    const [a, b] = [await socketsOn(1), await socketsOn(2)];
    return a + b === 1 ? (a === 1 ? 1 : 2) : null;
  });
  const other = on === 1 ? 2 : 1;
  console.log(`  the console's socket is on pod-${on}; killing it, pod-${other} held out of the LB meanwhile`);
  const token = await login("expert2@browser.test", POD[other]);
  const before = (await api(POD[other], "GET", `/events?org_id=${ORG}&after=0&limit=1`, { token })).body.latest_seq;
  await haproxy(`set server pods/pod-${other} state maint`);
  const killedAt = Date.now();
  process.kill(podPid(on), "SIGKILL");
  await page2.locator('#link-state[data-state="reconnecting"]').waitFor({ timeout: 10_000 });
  timings["kill -9 → indicator shows the loss"] = Date.now() - killedAt;
  assert.match(await page2.textContent("#link-state"), /Connection lost/);
  // An event while the console is cut off: a customer writes, straight to the surviving pod.
  tag.ken = nonce();
  await customerWrites("telegram", `Are you still there? [${tag.ken}]`, "Ken Thompson", `pod-${other}`);
  await waitFor("the new item's events in the log", async () => {
    const r = await api(POD[other], "GET", `/events?org_id=${ORG}&after=${before}&limit=100`, { token });
    return r.body.events.some((e) => e.event === "queue_item_created");
  });
  assert.equal(await page2.getAttribute("#link-state", "data-state"), "reconnecting", "still cut off");
  assert.equal(await row(page2, tag.ken).count(), 0, "not on screen yet");
  const back = Date.now();
  await haproxy(`set server pods/pod-${other} state ready`);
  await page2.locator('#link-state[data-state="live"]').waitFor({ timeout: 20_000 });
  timings["LB back → reconnected and caught up"] = Date.now() - back;
  const caught = Number(await page2.getAttribute("#link-state", "data-caught-up"));
  assert.ok(caught >= 1, `caught up ${caught} events`);
  await row(page2, tag.ken).waitFor({ timeout: 10_000 });
  console.log(`  caught up ${caught} missed event(s); "${tag.ken}" is on screen`);
  await page2.screenshot({ path: join(ARTIFACTS, "console-after-reconnect.png") });
  await startPod(on);
  await waitFor(`pod-${on} back`, async () => (await fetch(`${POD[on]}/ready`).catch(() => ({ ok: false }))).ok, { timeout: 60_000 });
});

membersTests({ newPage, scan, closePage: async (label) => { await pages.get(label)?.context().close(); pages.delete(label); } });
reportsTests({ newPage, logIn, scan, nonce, closePage: async (label) => { await pages.get(label)?.context().close(); pages.delete(label); } });
privacyTests({ newPage, logIn, scan, row, nonce, closePage: async (label) => { await pages.get(label)?.context().close(); pages.delete(label); } });
autopilotTests({ newPage, logIn, scan, row, nonce, closePage: async (label) => { await pages.get(label)?.context().close(); pages.delete(label); } });
draftDiffTests({ newPage, logIn, scan, nonce, closePage: async (label) => { await pages.get(label)?.context().close(); pages.delete(label); } });
journeyTests({ newPage, logIn, scan, nonce, closePage: async (label) => { await pages.get(label)?.context().close(); pages.delete(label); } });

test("axe-core: no serious or critical accessibility violations; no script errors or CSP violations", async () => {
  await scan(page2, "queue and conversation (second console)");
  assert.deepEqual(axeFindings, [], `accessibility:\n${axeFindings.join("\n")}`);
  assert.deepEqual(problems, [], `script errors / CSP:\n${problems.join("\n")}`);
});

const failed = await run({
  onFailure: async (name) => {
    const safe = name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60);
    for (const [label, page] of pages) {
      if (!page.isClosed()) await page.screenshot({ path: join(ARTIFACTS, `failed-${safe}-${label.replace(/[^a-z0-9]+/gi, "_")}.png`) }).catch(() => {});
    }
  },
});
await browser.close();
process.exit(failed ? 1 : 0);
