// The autopilot's hold in the browser: a draft the org's rules admit shows, in an expert's
// console, as "Sending soon" with a countdown that moves and the rule that admitted it; the
// expert stops it from the keyboard (t) and the item waits for them; an admin's header kill
// switch stops another hold live in the expert's console. Each state is scanned by axe.
// Registered by run.mjs.

import assert from "node:assert/strict";
import { LB, ORG, api, customerWrites, login, test, waitFor } from "./lib.mjs";

/** `newPage`, `logIn`, `scan`, `row`, `nonce` and `closePage` are run.mjs's. */
export function autopilotTests({ newPage, logIn, scan, row, nonce, closePage }) {
  test("autopilot: a held draft counts down in the console, t stops it, the header's kill switch stops the rest live", async () => {
    const adminToken = await login("admin@browser.test");
    const policy = {
      enabled: true,
      // Any confidence, so the demo agent's drafts qualify; a long hold, so none sends itself
      // while the test looks at it.
      channels: { telegram: { enabled: true, min_confidence: 0, hold_secs: 900 } },
      never_when: { unknown_link_or_number: false },
    };
    const put = await api(LB, "PUT", `/orgs/${ORG}/autopilot`, { token: adminToken, body: policy });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    try {
      const tag = nonce();
      const [first, second] = [`Ada ${tag}`, `Alan ${tag}`];
      await customerWrites("telegram", `When do you open? [${tag}-1]`, first);
      await customerWrites("telegram", `Do you ship abroad? [${tag}-2]`, second);

      const expert = await newPage("autopilot-expert");
      await logIn(expert, LB, "expert1@browser.test");
      await row(expert, `${tag}-1`).waitFor({ timeout: 20_000 });
      await row(expert, `${tag}-1`).locator(".chip", { hasText: "Sending soon" }).waitFor({ timeout: 20_000 });
      await row(expert, `${tag}-1`).click();
      const countdown = expert.locator("#autopilot-countdown");
      await countdown.waitFor();
      const before = await countdown.textContent();
      assert.match(before, /^sends itself in \d+:\d\d$/);
      assert.match(await expert.textContent("#autopilot-hold"), /telegram confidence >= 0\.00/);
      await waitFor("the countdown to move", async () => (await countdown.textContent()) !== before, { timeout: 5_000 });
      assert.equal(await expert.getAttribute("#autopilot-countdown", "role"), "timer");
      await scan(expert, "conversation: a draft on the autopilot's hold");

      // Stopped from the keyboard: the item waits for an expert, with nothing sent.
      const itemId = await expert.evaluate(() => location.hash.split("/").pop());
      await expert.locator(".detail").focus();
      await expert.keyboard.press("t");
      await expert.locator("#detail-banner", { hasText: "Autopilot stopped" }).waitFor();
      await expert.locator("#detail-status", { hasText: "Pending" }).waitFor();
      assert.equal(await countdown.count(), 0, "no countdown once stopped");
      const stopped = await api(LB, "GET", `/expert-queue/${itemId}`, { token: adminToken });
      assert.equal(stopped.body.status, "pending");
      assert.equal(stopped.body.send_at, null);
      await scan(expert, "conversation: the hold stopped");
      await expert.click(".back");

      // The admin's kill switch, reached by Tab and pressed with Enter: the other hold
      // becomes an ordinary pending item in the expert's console without a reload.
      await row(expert, `${tag}-2`).locator(".chip", { hasText: "Sending soon" }).waitFor({ timeout: 20_000 });
      const admin = await newPage("autopilot-admin");
      await logIn(admin, LB, "admin@browser.test");
      await admin.locator("#autopilot-pause").focus();
      await admin.keyboard.press("Enter");
      await admin.locator("#autopilot-state", { hasText: "Autopilot paused" }).waitFor();
      await row(expert, `${tag}-2`).locator(".chip", { hasText: "Pending" }).waitFor({ timeout: 20_000 });
      const now = await api(LB, "GET", `/orgs/${ORG}/autopilot`, { token: adminToken });
      assert.equal(now.body.enabled, false);
      await scan(admin, "queue: the autopilot paused from the header");
      await closePage("autopilot-admin");
      await closePage("autopilot-expert");
    } finally {
      await api(LB, "PUT", `/orgs/${ORG}/autopilot`, { token: adminToken, body: { ...policy, enabled: false } });
    }
  });
}
