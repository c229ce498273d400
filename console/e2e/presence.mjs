// Presence and customer context, in the browser (called from run.mjs with its helpers): two
// experts in two browser contexts on different pods open the same conversation and each
// sees the other; when one leaves, the other's notice goes within seconds. The customer's
// earlier conversation is listed with its outcome and opens inline. The settings dialog
// (opt-in notifications) is checked for accessibility.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { POD, WORK, customerWrites, test, waitFor } from "./lib.mjs";

/** Runs SQL on the stack's database (scripts/test-browser.sh writes its env to SB_WORK). */
function sql(statement) {
  const env = readFileSync(join(WORK, "env"), "utf8");
  const url = env.match(/^DATABASE_URL=(.*)$/m)?.[1];
  assert.ok(url, "DATABASE_URL in the stack's env");
  return execFileSync("psql", [url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", statement], { encoding: "utf8" }).trim();
}

/** `{ newPage, logIn, scan, row, nonce, pages }` are run.mjs's own helpers. */
export function presenceTests({ newPage, logIn, scan, row, nonce, pages }) {
  const tag = nonce();
  const customer = `Rachel Carson ${tag}`;
  const first = `My first order never came [${tag}]`;
  const second = `Following up on my order [${tag}]`;

  test("customer context: an earlier conversation of the customer is listed with its outcome and opens", async () => {
    const page = await newPage("expert1-context");
    await logIn(page, POD[1], "expert1@browser.test");
    await customerWrites("slack", first, customer);
    await row(page, first).waitFor({ timeout: 20_000 });
    // The product never closes a conversation yet; an earlier, finished one is made here.
    const closed = sql(
      `WITH c AS (SELECT conversation_id AS id FROM messages WHERE body = '${first}' LIMIT 1),
            q AS (UPDATE expert_queue SET status = 'resolved', claimed_by = NULL, resolved_at = now()
                  WHERE conversation_id = (SELECT id FROM c) AND status <> 'resolved')
       UPDATE conversations SET status = 'closed', closed_at = now()
       WHERE id = (SELECT id FROM c) RETURNING id`,
    );
    assert.match(closed, /^[0-9a-f-]{36}$/, `closed the first conversation: ${closed}`);
    await customerWrites("slack", second, customer);
    await row(page, second).waitFor({ timeout: 20_000 });
    await row(page, second).click();
    const summary = page.locator("details.context > summary");
    await summary.filter({ hasText: "1 other conversation" }).waitFor({ timeout: 10_000 });
    await summary.click();
    const earlier = page.locator(`#customer-context li[data-conversation="${closed}"]`);
    await earlier.locator(".chip", { hasText: "Resolved" }).waitFor();
    assert.match(await earlier.textContent(), /last message/);
    assert.match(await page.locator("#customer-context li.current").textContent(), /this conversation/);
    await earlier.locator('button[aria-expanded="false"]').click();
    await earlier.locator(".context-messages .msg-body", { hasText: first }).waitFor();
    await scan(page, "conversation with the customer's history open");
  });

  test("presence: two experts on two pods see each other on a conversation, and the notice goes when one leaves", async () => {
    const one = pages.get("expert1-context");
    const two = await newPage("expert2-presence");
    await logIn(two, POD[2], "expert2@browser.test");
    await row(two, second).waitFor({ timeout: 20_000 });
    await row(two, second).click();
    await two.locator("#presence", { hasText: "expert1" }).waitFor({ timeout: 10_000 });
    await one.locator("#presence", { hasText: "expert2" }).waitFor({ timeout: 10_000 });
    assert.match(await two.textContent("#presence"), /is also viewing/);
    await scan(two, "conversation with another viewer");
    // Expert 1 goes back to the queue: expert 2's notice goes within seconds.
    await one.keyboard.press("Escape");
    await one.waitForFunction(() => location.hash === "#/queue");
    await waitFor("the presence notice to go", async () => await two.locator("#presence").isHidden(), { timeout: 8_000 });
    // Back again, then the browser context closes (a disconnect): gone again.
    await row(one, second).click();
    await two.locator("#presence", { hasText: "expert1" }).waitFor({ timeout: 10_000 });
    await one.context().close();
    pages.delete("expert1-context");
    await waitFor("the presence notice to go after the disconnect", async () => await two.locator("#presence").isHidden(), { timeout: 8_000 });
  });

  test("settings: notifications are opt-in, asked on the click", async () => {
    const two = pages.get("expert2-presence");
    await two.click("#open-settings");
    await two.locator("#notify-browser").waitFor();
    assert.equal(await two.isChecked("#notify-browser"), false);
    assert.equal(await two.isChecked("#notify-sound"), false);
    await two.check("#notify-sound");
    await scan(two, "settings dialog");
    await two.click("dialog.settings button.primary");
    assert.deepEqual(await two.evaluate(() => JSON.parse(localStorage.getItem("sb.notify"))), { notify: false, sound: true });
    await two.context().close();
    pages.delete("expert2-presence");
  });
}
