// The reports page in the browser: after a few releases through the API (the draft as is,
// and an expert's own text), an admin's Reports page draws every chart with data, keeps the
// numbers in tables, refuses a range over 92 days on the page, saves the org's SLA, and
// lists the scheduled reports; each state is scanned by axe. Also the queue's empty state
// beside an open conversation (a search that matches nothing). Registered by run.mjs.

import assert from "node:assert/strict";
import { join } from "node:path";
import { ARTIFACTS, LB, ORG, api, customerWrites, login, test, waitFor } from "./lib.mjs";

/** `newPage`, `logIn`, `scan`, `nonce` and `closePage` are run.mjs's. */
export function reportsTests({ newPage, logIn, scan, nonce, closePage }) {
  test("reports: charts with data and their tables, a refused range, the SLA setting; an empty search beside a conversation", async () => {
    // Two customers answered through the API: one with the draft, one in the expert's words.
    const tag = nonce();
    const admin = await login("admin@browser.test");
    await customerWrites("slack", `Where is my parcel? [${tag}]`, "Radia Perlman");
    await customerWrites("email", `Can I change my plan? [${tag}]`, "Frances Allen");
    const items = await waitFor("both items with their drafts", async () => {
      const list = await api(LB, "GET", `/expert-queue?org_id=${ORG}&status=pending&limit=200`, { token: admin });
      const mine = list.body.items.filter((i) => i.last_message?.preview.includes(tag) && i.draft);
      return mine.length === 2 ? mine : null;
    }, { timeout: 60_000 });
    const act = (item, action, body) =>
      api(LB, "POST", `/expert-queue/${item.id}/${action}`, { token: admin, body, headers: { "idempotency-key": `reports-${tag}-${item.id}` } });
    assert.equal((await act(items[0], "release", {})).status, 200);
    assert.equal((await act(items[1], "respond", { body: `Yes: from next month. [${tag}]` })).status, 200);

    const page = await newPage("reports");
    await logIn(page, LB, "admin@browser.test");
    await page.click('nav a[data-page="reports"]');
    await page.locator("#chart-messages .summary", { hasText: "messages:" }).waitFor({ timeout: 15_000 });
    for (const id of ["chart-messages", "chart-first-reply", "chart-sla", "chart-replies", "chart-experts"]) {
      const fig = page.locator(`#${id}`);
      // Drawn: the canvas has a size and something painted on it.
      await waitFor(`${id} painted`, () =>
        fig.locator("canvas").evaluate((c) => {
          if (c.width === 0 || c.height === 0) return false;
          const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
          for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) return true;
          return false;
        }),
      );
      const label = await fig.locator("canvas").getAttribute("aria-label");
      assert.ok(label && label.length > 20, `${id} has a text alternative: ${label}`);
      assert.ok((await fig.locator("table tbody tr").count()) > 0, `${id} has its numbers in a table`);
    }
    const replies = await page.textContent("#chart-replies .summary");
    assert.match(replies, /draft unchanged \d/, replies);
    assert.match(replies, /expert's own text \d/, replies);
    assert.match(await page.textContent("#chart-experts .summary"), /admin@browser\.test|most releases/);
    await page.locator(".reports ~ section .status-line").filter({ hasNotText: "Loading" }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, "console-reports.png"), fullPage: true });
    await scan(page, "reports page");
    await page.click("#chart-replies summary");
    await page.locator("#chart-replies table").waitFor();
    await scan(page, "reports page with a chart's numbers open");

    // More than 92 days: the page says so and asks nothing.
    await page.fill("#report-from", "2025-01-01");
    await page.click('.report-range button[type="submit"]');
    await page.locator("#report-range-error", { hasText: "92 days" }).waitFor();
    assert.equal(await page.getAttribute("#report-from", "aria-invalid"), "true");
    await scan(page, "reports: a refused range");

    // The SLA: saved for the org, then put back.
    await page.fill("#sla-minutes", "45");
    await page.click('.sla-form button[type="submit"]');
    await page.locator(".sla-form .status-line", { hasText: "Saved" }).waitFor();
    const settings = await api(LB, "GET", `/orgs/${ORG}/settings`, { token: admin });
    assert.equal(settings.body.sla_minutes, 45);
    await scan(page, "reports: the SLA saved");
    assert.equal((await api(LB, "PATCH", `/orgs/${ORG}/settings`, { token: admin, body: { sla_minutes: 60 } })).status, 200);

    // The queue with a conversation open and a search that matches nothing: the empty list
    // is a group with its text, not a listbox without options; rows bring the listbox back.
    await page.click('nav a[data-page="queue"]');
    await page.locator(".vrow").first().click();
    await page.locator("#detail-title").waitFor();
    await page.fill("#filter-search", `nothing-matches-${tag}`);
    await page.locator(".vlist .empty").waitFor();
    assert.equal(await page.getAttribute(".vlist", "role"), "group");
    await scan(page, "queue: a search that matches nothing, with a conversation open");
    await page.fill("#filter-search", "");
    await page.locator(".vrow").first().waitFor();
    assert.equal(await page.getAttribute(".vlist", "role"), "listbox");
    await closePage("reports");
  });
}
