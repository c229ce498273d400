// Saved replies and internal notes, in the browser (called from run.mjs with its helpers):
// an admin manages a saved reply (an unknown placeholder is refused), an expert inserts it
// with the keyboard only and sends it (the fake provider gets the filled-in text); an
// expert's internal note appears live, labelled, on a second expert's console on the other
// pod, and no provider ever receives it.

import assert from "node:assert/strict";
import { LB, POD, api, customerWrites, login, providerCalls, sleep, test, waitFor } from "./lib.mjs";

const KINDS = ["slack", "whatsapp", "telegram", "email"];

async function allProviderTexts() {
  const calls = await Promise.all(KINDS.map((k) => providerCalls(k)));
  return calls.flat().map((c) => JSON.stringify(c));
}

/** `{ newPage, logIn, scan, row, nonce, pages }` are run.mjs's own helpers. */
export function teamNotesTests({ newPage, logIn, scan, row, nonce, pages }) {
  const tag = nonce();
  const replyName = `Shipped ${tag}`;

  test("saved replies: an admin manages them; an unknown placeholder is refused with its name", async () => {
    const admin = await newPage("admin-saved-replies");
    await logIn(admin, LB, "admin@browser.test");
    await admin.click('nav a[data-page="admin/saved-replies"]');
    await admin.locator("#sr-status").filter({ hasText: /saved repl/ }).waitFor();
    await admin.fill("#sr-name", replyName);
    await admin.fill("#sr-body", "Hi {{customer.first_name}}, order {{order.id}} is on its way.");
    await admin.click("#sr-submit");
    await admin.locator("#sr-error", { hasText: "{{order.id}}" }).waitFor();
    assert.doesNotMatch(await admin.textContent("#sr-error"), /unknown placeholder\(s\): \{\{customer/);
    await scan(admin, "admin: saved replies, refused");
    await admin.fill("#sr-body", `Hi {{customer.first_name}}, your order ships today. {{expert.first_name}} [${tag}]`);
    await admin.click("#sr-submit");
    await admin.locator(`tr[data-reply="${replyName}"]`).waitFor();
    assert.equal(await admin.textContent("#sr-error"), "");
    // Edit: the form takes the reply, a save changes it in place.
    await admin.click(`button[aria-label="Edit ${replyName}"]`);
    assert.equal(await admin.inputValue("#sr-name"), replyName);
    await admin.fill("#sr-body", `Hi {{customer.first_name}}, your order ships today! {{expert.first_name}} [${tag}]`);
    await admin.click("#sr-submit");
    await admin.locator(`tr[data-reply="${replyName}"] .sr-body`, { hasText: "ships today!" }).waitFor();
    await scan(admin, "admin: saved replies");
    await admin.context().close();
    pages.delete("admin-saved-replies");
  });

  test("saved replies: inserted by keyboard (/ and letters, arrows, Enter), filled in, edited and sent", async () => {
    const page = await newPage("expert-saved-reply");
    await logIn(page, LB, "expert1@browser.test");
    const customer = `Rosa Parks ${tag}`;
    await customerWrites("slack", `Has my order shipped? [${tag}]`, customer);
    await row(page, `Has my order shipped? [${tag}]`).waitFor({ timeout: 20_000 });
    await row(page, `Has my order shipped? [${tag}]`).click();
    await waitFor("the draft", async () => (await page.inputValue("#composer")).length > 0);
    const itemId = await page.evaluate(() => location.hash.split("/").pop());
    const token = await login("expert1@browser.test");
    const item = (await api(LB, "GET", `/expert-queue/${itemId}`, { token })).body;
    const first = (item.customer.display_name || item.customer.external_id).trim().split(/\s+/)[0];

    await page.keyboard.press("e");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "composer");
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Backspace");
    // Nothing matches: the picker says so; Escape closes it and leaves the focus in the box.
    await page.keyboard.type("/zzzz");
    await page.locator("#saved-reply-hint", { hasText: "No saved reply matches" }).waitFor();
    await page.keyboard.press("Escape");
    assert.equal(await page.locator("#saved-reply-hint").isHidden(), true);
    assert.equal(await page.evaluate(() => document.activeElement?.id), "composer");
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Backspace");

    await page.keyboard.type(`/shipped${tag}`);
    const option = page.locator('#saved-reply-list [role="option"]', { hasText: replyName });
    await option.waitFor();
    const active = await page.getAttribute("#composer", "aria-activedescendant");
    assert.equal(await page.getAttribute(`#${active}`, "aria-selected"), "true");
    await scan(page, "conversation: saved-reply picker open");
    // Down and back up: the keyboard moves the choice, the box keeps the focus.
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("ArrowUp");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "composer");
    const chosen = await page.getAttribute("#composer", "aria-activedescendant");
    assert.match(await page.textContent(`#${chosen}`), new RegExp(replyName));
    await page.keyboard.press("Enter");
    const rendered = `Hi ${first}, your order ships today! Expert1 [${tag}]`;
    assert.equal(await page.inputValue("#composer"), rendered, "the placeholders are filled in the box");
    assert.equal(await page.locator("#saved-reply-list").isHidden(), true);
    assert.match(await page.textContent("#saved-reply-status"), /Inserted the saved reply/);
    // The expert edits the filled-in text, then sends it.
    await page.keyboard.type(" See you!");
    const sent = `${rendered} See you!`;
    assert.equal(await page.textContent('[data-action="release"]'), "Release edited");
    await page.keyboard.press("Control+Enter");
    await waitFor("the fake Slack API to receive the filled-in reply", async () =>
      (await providerCalls("slack")).some((c) => c.text === sent),
    );
    await page.locator("#detail-status", { hasText: "Awaiting customer" }).waitFor();
    assert.equal((await providerCalls("slack")).filter((c) => c.text === sent).length, 1, "sent once");
    assert.ok(!(await allProviderTexts()).some((t) => t.includes("{{")), "no placeholder reaches a provider");
    await page.context().close();
    pages.delete("expert-saved-reply");
  });

  test("internal notes: seen live and labelled by a second expert on the other pod, never sent", async () => {
    const writer = await newPage("notes-writer@pod-1");
    const reader = await newPage("notes-reader@pod-2");
    await logIn(writer, POD[1], "expert1@browser.test");
    await logIn(reader, POD[2], "expert2@browser.test");
    const question = `Can I change the delivery address? [note-${tag}]`;
    await customerWrites("telegram", question, `Mae Jemison ${tag}`);
    for (const p of [writer, reader]) {
      await row(p, question).waitFor({ timeout: 20_000 });
      await row(p, question).click();
      await waitFor("the draft", async () => (await p.inputValue("#composer")).length > 0);
    }
    const text = `NOTE ${tag}: customer moved last week, check the new address before replying`;
    await writer.fill("#note-body", text);
    await writer.click("#note-add");
    await writer.locator(".msg.note", { hasText: text }).waitFor();
    const seen = reader.locator(".msg.note", { hasText: text });
    await seen.waitFor({ timeout: 15_000 });
    assert.match(await seen.locator(".note-label").textContent(), /Internal note/);
    assert.equal(await reader.locator(".msg.out", { hasText: text }).count(), 0, "not shown as a message");
    await waitFor("the note read out on the second console", async () =>
      (await reader.textContent("#note-live")).includes(`New internal note from expert1@browser.test: ${text}`),
    );
    await scan(reader, "conversation with an internal note (live)");

    // The reply goes out; the note does not, on any channel.
    const draft = await writer.inputValue("#composer");
    await writer.click('[data-action="release"]');
    await waitFor("the fake Telegram API to receive the reply", async () =>
      (await providerCalls("telegram")).some((c) => c.text === draft),
    );
    await sleep(1500);
    const texts = await allProviderTexts();
    assert.ok(texts.some((t) => t.includes(draft)), "the reply was seen where the note is looked for");
    assert.equal(texts.filter((t) => t.includes(`NOTE ${tag}`)).length, 0, "no provider call carries the note");
    const agent = (await providerCalls("agent")).map((c) => JSON.stringify(c));
    assert.ok(agent.some((t) => t.includes(`note-${tag}`)), "the agent drafted the customer's message");
    assert.equal(agent.filter((t) => t.includes(`NOTE ${tag}`)).length, 0, "the agent never gets the note");
    // Still there after a reload, from the server.
    await reader.reload();
    await reader.locator(".msg.note", { hasText: text }).waitFor({ timeout: 15_000 });
    for (const [label, p] of [["notes-writer@pod-1", writer], ["notes-reader@pod-2", reader]]) {
      await p.context().close();
      pages.delete(label);
    }
  });
}
