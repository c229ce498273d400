// A customer's data in the browser: an admin exports a customer (the file holds what they
// wrote), erases them after a confirmation that names what goes (their item leaves another
// expert's console, on whichever pod, live), sets the org's retention window (a value out of
// bounds is refused on the page) and downloads the audit log as CSV with the erasure in it,
// naming no one. Each state is scanned by axe. Registered by run.mjs.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { LB, ORG, api, customerWrites, login, test, waitFor } from "./lib.mjs";

/** `newPage`, `logIn`, `scan`, `row`, `nonce` and `closePage` are run.mjs's. */
export function privacyTests({ newPage, logIn, scan, row, nonce, closePage }) {
  test("customer data: export, erase after a confirmation (gone live from another console), retention window, audit log download", async () => {
    const tag = nonce();
    const name = `Grace Hopper ${tag}`;
    const text = `Please delete everything about me [${tag}]`;
    await customerWrites("telegram", text, name);

    const expert = await newPage("privacy-expert");
    await logIn(expert, LB, "expert1@browser.test");
    await row(expert, tag).waitFor({ timeout: 20_000 });
    // An expert sees no customer-data controls, and the server refuses them anyway.
    await row(expert, tag).click();
    await expert.locator("#detail-title").waitFor();
    assert.equal(await expert.locator("#customer-erase").count(), 0, "no erase button for an expert");
    await expert.click(".back");
    await row(expert, tag).waitFor();

    const admin = await newPage("privacy-admin");
    await logIn(admin, LB, "admin@browser.test");
    await row(admin, tag).click();
    await admin.locator("#customer-export").waitFor();
    const itemId = await admin.evaluate(() => location.hash.split("/").pop());
    const adminToken = await login("admin@browser.test");
    const customerId = (await api(LB, "GET", `/expert-queue/${itemId}`, { token: adminToken })).body.customer.id;

    // Export: a file with the customer's own words in it.
    const [file] = await Promise.all([admin.waitForEvent("download"), admin.click("#customer-export")]);
    assert.match(file.suggestedFilename(), /\.json$/);
    const exported = JSON.parse(await readFile(await file.path(), "utf8"));
    assert.ok(JSON.stringify(exported).includes(text), "the export holds what the customer wrote");
    await admin.locator("#customer-data-status", { hasText: "Saved" }).waitFor();
    await scan(admin, "conversation: the customer's data exported");

    // Erase: the confirmation names the person and what goes; Cancel changes nothing.
    await admin.click("#customer-erase");
    await admin.locator("#erase-confirm[open]").waitFor();
    const confirmation = await admin.textContent("#erase-confirm");
    assert.match(confirmation, new RegExp(name));
    assert.match(confirmation, /every message they wrote/);
    assert.match(confirmation, /drafts, internal notes/);
    assert.match(confirmation, /cannot be undone/);
    await scan(admin, "conversation: the erasure's confirmation");
    await admin.locator("#erase-confirm").getByRole("button", { name: "Cancel" }).click();
    assert.equal((await api(LB, "GET", `/customers/${customerId}/erasure`, { token: adminToken })).status, 404);
    await admin.click("#customer-erase");
    await admin.locator("#erase-confirm").getByRole("button", { name: "Erase customer" }).click();
    await admin.locator("#customer-data-status", { hasText: "Erased:" }).waitFor({ timeout: 30_000 });
    assert.match(await admin.textContent("#customer-data-status"), /1 conversation, \d+ messages?/);
    await admin.locator("#detail-banner", { hasText: "erased" }).waitFor();
    // Gone from the other console without a reload, and from the server.
    await waitFor("the erased customer's row gone from the expert's queue", async () => (await row(expert, tag).count()) === 0);
    const erasure = await api(LB, "GET", `/customers/${customerId}/erasure`, { token: adminToken });
    assert.equal(erasure.status, 200);
    assert.equal(erasure.body.status, "done");
    assert.equal((await api(LB, "GET", `/expert-queue/${itemId}`, { token: adminToken })).status, 404);
    await scan(admin, "conversation: the customer erased");

    // Retention: refused out of bounds on the page, saved in bounds, then put back.
    await admin.click('nav a[data-page="admin/org"]');
    await admin.locator("#retention-keep").waitFor();
    if (await admin.isChecked("#retention-keep")) await admin.click("#retention-keep");
    await admin.fill("#retention-days", "0");
    await admin.click('.retention-form button[type="submit"]');
    await admin.locator("#retention-error", { hasText: "1 to 3650" }).waitFor();
    assert.equal(await admin.getAttribute("#retention-days", "aria-invalid"), "true");
    assert.equal((await api(LB, "GET", `/orgs/${ORG}/settings`, { token: adminToken })).body.retention_days ?? null, null);
    await scan(admin, "org settings: a refused retention window");
    await admin.fill("#retention-days", "30");
    await admin.click('.retention-form button[type="submit"]');
    await admin.locator("#retention-note", { hasText: "Saved" }).waitFor();
    assert.equal((await api(LB, "GET", `/orgs/${ORG}/settings`, { token: adminToken })).body.retention_days, 30);
    await admin.click("#retention-keep");
    await admin.click('.retention-form button[type="submit"]');
    await admin.locator("#retention-note", { hasText: "until a customer is erased" }).waitFor();
    assert.equal((await api(LB, "GET", `/orgs/${ORG}/settings`, { token: adminToken })).body.retention_days ?? null, null);

    // The audit log: the erasure is there with the customer's id, and nothing of them.
    await admin.fill("#audit-action", "customer.erased");
    await admin.selectOption("#audit-format", "csv");
    const [log] = await Promise.all([admin.waitForEvent("download"), admin.click('.audit-form button[type="submit"]')]);
    const csv = await readFile(await log.path(), "utf8");
    const lines = csv.trim().split("\n");
    assert.match(lines[0], /action/);
    assert.ok(lines.some((l) => l.includes("customer.erased") && l.includes(customerId)), csv.slice(0, 500));
    assert.ok(!csv.includes(tag), "the audit log names no one");
    await admin.locator("#audit-status", { hasText: "Saved" }).waitFor();
    await scan(admin, "org settings: the audit log downloaded");
    await closePage("privacy-admin");
    await closePage("privacy-expert");
  });
}
