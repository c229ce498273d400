// The reports page in the browser: after a few releases through the API (the draft as is,
// and an expert's own text), an admin's Reports page draws every chart with data, keeps the
// numbers in tables, draws the org's autopilot threshold on the channel's calibration chart
// (and moves it when the policy changes), lets the admin choose a threshold against the
// chart and turn the channel on, refuses a range over 92 days on the page, saves the org's
// SLA, and lists the scheduled reports; each state is scanned by axe. Also the
// queue's empty state beside an open conversation (a search that matches nothing).
// Registered by run.mjs.

import assert from "node:assert/strict";
import { join } from "node:path";
import { ARTIFACTS, LB, ORG, api, customerWrites, login, test, waitFor } from "./lib.mjs";

/**
 * The canvas column with the most pixels of the threshold's near-black (views/reports.ts),
 * which no bar, grid line or tick label has, and how many: a dashed line across the plot
 * has 40 or more, its label and anything else a dozen at most.
 */
function thresholdColumn(canvas) {
  return canvas.evaluate((c) => {
    const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let best = { x: -1, pixels: 0 };
    for (let x = 0; x < c.width; x++) {
      let n = 0;
      for (let y = 0; y < c.height; y++) {
        const i = (y * c.width + x) * 4;
        const [r, g, b, a] = [px[i], px[i + 1], px[i + 2], px[i + 3]];
        if (a > 200 && Math.max(r, g, b) < 60 && Math.max(r, g, b) - Math.min(r, g, b) < 8) n++;
      }
      if (n > best.pixels) best = { x, pixels: n };
    }
    return best;
  });
}

/** `newPage`, `logIn`, `scan`, `nonce` and `closePage` are run.mjs's. */
export function reportsTests({ newPage, logIn, scan, nonce, closePage }) {
  test("reports: charts with data and their tables, the autopilot's threshold on its chart, a refused range, the SLA setting; an empty search beside a conversation", async () => {
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

    // A Slack threshold in the org's policy, the org's switch off so that nothing sends itself.
    const before = (await api(LB, "GET", `/orgs/${ORG}/autopilot`, { token: admin })).body;
    const policy = (min_confidence) => ({ ...before, enabled: false, channels: { ...before.channels, slack: { enabled: true, min_confidence, hold_secs: 60 } } });
    const put = await api(LB, "PUT", `/orgs/${ORG}/autopilot`, { token: admin, body: policy(0.8) });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    try {
      await reportsPage(tag, admin, policy, before);
    } finally {
      assert.equal((await api(LB, "PUT", `/orgs/${ORG}/autopilot`, { token: admin, body: before })).status, 200);
    }
  });

  async function reportsPage(tag, admin, policy, before) {
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
    // The Slack calibration chart draws the threshold as a labelled line that a screen reader
    // reads in the chart's text and its table.
    const slack = page.locator("#chart-calibration-slack");
    const line = await waitFor("the threshold's line", async () => {
      const found = await thresholdColumn(slack.locator("canvas"));
      return found.pixels >= 40 ? found : null;
    });
    const text = await slack.locator("canvas").getAttribute("aria-label");
    assert.match(text, /The dashed line marks the org's threshold for Slack, 0\.80, off now/, text);
    assert.match(text, /At 0\.80 on slack \(off now\), \d+ of the last 7 days' drafts would have been sent by the autopilot/, text);
    assert.equal(await slack.locator("thead th").last().textContent(), "At or above 0.80");
    assert.equal(await slack.locator("tbody tr").count(), 10, "one row per band");
    assert.equal(await slack.locator("tbody tr").nth(8).locator("td").last().textContent(), "yes", "0.8–0.9 is above 0.80");
    assert.equal(await slack.locator("tbody tr").nth(7).locator("td").last().textContent(), "no");
    // A lower threshold, shown again: the line moves left, by five bands of ten.
    assert.equal((await api(LB, "PUT", `/orgs/${ORG}/autopilot`, { token: admin, body: policy(0.3) })).status, 200);
    await page.click('.report-range button[type="submit"]');
    await slack.locator("canvas[aria-label*='Slack, 0.30']").waitFor();
    const moved = await waitFor("the line at 0.30", async () => {
      const found = await thresholdColumn(slack.locator("canvas"));
      return found.pixels >= 40 && found.x < line.x ? found : null;
    });
    const width = await slack.locator("canvas").evaluate((c) => c.width);
    assert.ok(line.x - moved.x > width / 4, `moved from ${line.x} to ${moved.x} of ${width}`);
    await scan(page, "reports: the autopilot's threshold on its chart");
    // The calibration's usual window, one button away.
    await page.getByRole("button", { name: "Last 30 days" }).click();
    await slack.locator("canvas[aria-label*=\"of the last 30 days' drafts\"]").waitFor();

    // Chosen on the chart: typing a threshold moves the line before anything is saved; one
    // out of bounds is refused on the page and changes nothing.
    assert.equal(await page.inputValue("#autopilot-threshold-slack"), "0.30");
    await page.fill("#autopilot-threshold-slack", "0.9");
    await page.locator("#autopilot-note-slack", { hasText: "The line shows 0.90; not saved yet." }).waitFor();
    await waitFor("the line to follow the typed threshold", async () => {
      const found = await thresholdColumn(slack.locator("canvas"));
      return found.pixels >= 40 && found.x > line.x ? found : null;
    });
    await page.fill("#autopilot-threshold-slack", "1.5");
    await page.click("#chart-calibration-slack .threshold-form button[type='submit']");
    await page.locator("#autopilot-error-slack", { hasText: "from 0 to 1" }).waitFor();
    assert.equal(await page.getAttribute("#autopilot-threshold-slack", "aria-invalid"), "true");
    assert.equal((await api(LB, "GET", `/orgs/${ORG}/autopilot`, { token: admin })).body.channels.slack.min_confidence, 0.3);
    await scan(page, "reports: a threshold refused");
    // Saved from the keyboard: the channel on, the org's switch on, the rest of the policy kept.
    await page.fill("#autopilot-threshold-slack", "0.55");
    await page.fill("#autopilot-hold-slack", "45");
    await page.check("#autopilot-on-slack");
    await page.focus("#autopilot-hold-slack");
    await page.keyboard.press("Enter");
    await page.locator("#autopilot-saved", { hasText: "Saved: Slack drafts at 0.55 or above send themselves after 45 s" }).waitFor();
    const now = (await api(LB, "GET", `/orgs/${ORG}/autopilot`, { token: admin })).body;
    assert.equal(now.enabled, true);
    assert.deepEqual(now.channels.slack, { enabled: true, min_confidence: 0.55, hold_secs: 45 });
    assert.deepEqual({ ...now.channels, slack: undefined }, { ...policy(0.3).channels, slack: undefined }, "the other channels are kept");
    assert.deepEqual(now.never_when, before.never_when);
    await slack.locator("canvas[aria-label*='Slack, 0.55: drafts']").waitFor();
    await scan(page, "reports: the autopilot turned on for a channel from its chart");
    assert.equal((await api(LB, "PUT", `/orgs/${ORG}/autopilot`, { token: admin, body: policy(0.8) })).status, 200);
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
  }
}
