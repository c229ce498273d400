// A message's journey in the browser: a customer writes, an expert releases the draft, and
// the admin reading the conversation opens the journey under the customer's message from
// the keyboard: a list of the exchange's steps from `received` to `delivered`, each with its
// time and pod, the button saying whether it is open (aria-expanded). Each state is scanned
// by axe. Registered by run.mjs.

import assert from "node:assert/strict";
import { LB, ORG, api, customerWrites, login, test, waitFor } from "./lib.mjs";

/** `newPage`, `logIn`, `scan`, `nonce` and `closePage` are run.mjs's. */
export function journeyTests({ newPage, logIn, scan, nonce, closePage }) {
  test("journey: under a message, a keyboard-reachable timeline from received to delivered", async () => {
    const tag = nonce();
    const admin = await login("admin@browser.test");
    const expert = await login("expert1@browser.test");
    await customerWrites("slack", `Did my refund go through? [${tag}]`, "Grace Hopper");
    const item = await waitFor("the item with its draft", async () => {
      const list = await api(LB, "GET", `/expert-queue?org_id=${ORG}&status=pending&limit=200`, { token: admin });
      return list.body.items.find((i) => i.last_message?.preview.includes(tag) && i.draft) ?? null;
    }, { timeout: 60_000 });
    const released = await api(LB, "POST", `/expert-queue/${item.id}/release`, {
      token: expert,
      body: {},
      headers: { "idempotency-key": `journey-${tag}` },
    });
    assert.equal(released.status, 200, JSON.stringify(released.body));
    const customer = await waitFor("the reply delivered", async () => {
      const c = await api(LB, "GET", `/conversations/${item.conversation_id}`, { token: admin });
      const reply = c.body.messages.find((m) => m.id === released.body.message.id);
      if (reply?.delivery?.status !== "sent") return null;
      return c.body.messages.find((m) => m.direction === "inbound" && m.body.includes(tag)) ?? null;
    }, { timeout: 30_000 });

    // The REST answer, for the customer's message and the reply alike.
    const path = (id) => `/conversations/${item.conversation_id}/messages/${id}/journey`;
    const rest = await api(LB, "GET", path(customer.id), { token: expert });
    assert.equal(rest.status, 200, JSON.stringify(rest.body));
    const names = rest.body.steps.map((s) => s.step);
    for (const step of ["received", "committed", "queued", "drafted", "shown", "released", "attempt", "delivered"]) {
      assert.ok(names.includes(step), `${step} in ${names}`);
    }
    assert.ok(!JSON.stringify(rest.body).includes(tag), "no customer text in the journey");

    const page = await newPage("journey");
    await logIn(page, LB, "admin@browser.test");
    await page.evaluate((id) => (location.hash = `#/queue/${id}`), item.id);
    const message = page.locator(".msg.in", { has: page.locator(".msg-body", { hasText: tag }) });
    await message.waitFor({ timeout: 20_000 });
    const toggle = message.locator("button.journey-toggle");
    const list = message.locator("ol.journey");
    assert.equal(await toggle.getAttribute("aria-expanded"), "false");
    assert.equal(await list.isHidden(), true, "closed until asked for");
    await scan(page, "conversation: a message with its journey closed");

    await toggle.focus();
    await page.keyboard.press("Enter");
    await list.locator('li[data-step="delivered"]').waitFor({ timeout: 10_000 });
    assert.equal(await toggle.getAttribute("aria-expanded"), "true");
    assert.equal(await toggle.getAttribute("aria-controls"), await list.getAttribute("id"));
    const lines = await list.locator("li").allTextContents();
    assert.match(lines[0], /^\d\d:\d\d:\d\d received · pod-/, lines.join("\n"));
    assert.ok(lines.some((l) => /drafted \(\d+\.\d s\)/.test(l)), lines.join("\n"));
    assert.ok(lines.some((l) => /released by \S/.test(l)), lines.join("\n"));
    assert.ok(lines.some((l) => / delivered · pod-/.test(l)), lines.join("\n"));
    await scan(page, "conversation: a message with its journey open");

    await page.keyboard.press("Enter");
    assert.equal(await toggle.getAttribute("aria-expanded"), "false");
    assert.equal(await list.isHidden(), true);
    await closePage("journey");
  });
}
