// The draft beside the reply in the browser: an expert releases the agent's draft with a
// few words changed; an admin reading the conversation sees what changed as a word diff
// (removed and added words, each announced as such), an expert reading it sees only the
// reply, and the REST answer gives the draft to the admin alone. Each state is scanned by
// axe. Registered by run.mjs.

import assert from "node:assert/strict";
import { LB, ORG, api, customerWrites, login, test, waitFor } from "./lib.mjs";

/** `newPage`, `logIn`, `scan`, `nonce` and `closePage` are run.mjs's. */
export function draftDiffTests({ newPage, logIn, scan, nonce, closePage }) {
  test("draft diff: an edited release shows admins the words changed from the draft, experts only the reply", async () => {
    const tag = nonce();
    const admin = await login("admin@browser.test");
    const expert = await login("expert1@browser.test");
    await customerWrites("slack", `Where is my order? [${tag}]`, "Grace Hopper");
    const item = await waitFor("the item with its draft", async () => {
      const list = await api(LB, "GET", `/expert-queue?org_id=${ORG}&status=pending&limit=200`, { token: admin });
      return list.body.items.find((i) => i.last_message?.preview.includes(tag) && i.draft) ?? null;
    }, { timeout: 60_000 });
    const draft = item.draft.text;
    assert.match(draft, /within two business days\./, draft);
    const sent = `${draft.replace("two business days", "three business days")} Sorry for the wait.`;
    const released = await api(LB, "POST", `/expert-queue/${item.id}/release`, {
      token: expert,
      body: { body: sent },
      headers: { "idempotency-key": `diff-${tag}` },
    });
    assert.equal(released.status, 200, JSON.stringify(released.body));

    // The REST answer: the draft for an admin, nothing for an expert.
    const reply = async (token) => {
      const c = await api(LB, "GET", `/conversations/${item.conversation_id}`, { token });
      assert.equal(c.status, 200, JSON.stringify(c.body));
      const m = c.body.messages.find((x) => x.body === sent);
      assert.ok(m, "the reply is in the conversation");
      return m;
    };
    assert.equal((await reply(admin)).draft, draft);
    assert.equal((await reply(expert)).draft ?? null, null, "an expert is not given the draft");

    const open = async (label, email) => {
      const page = await newPage(label);
      await logIn(page, LB, email);
      await page.evaluate((id) => (location.hash = `#/queue/${id}`), item.id);
      const message = page.locator(".msg.out", { has: page.locator(".msg-body", { hasText: "three business days" }) });
      await message.waitFor({ timeout: 20_000 });
      return { page, message };
    };

    // The admin: the diff, closed at first, opened from the keyboard.
    const { page, message } = await open("draft-diff-admin", "admin@browser.test");
    const diff = message.locator("details.draft-diff");
    await diff.waitFor();
    assert.equal(await diff.getAttribute("open"), null, "closed until asked for");
    await scan(page, "conversation: a reply changed from the draft, its diff closed");
    await diff.locator("summary").focus();
    await page.keyboard.press("Enter");
    await diff.locator(".diff del").first().waitFor();
    assert.deepEqual(await diff.locator(".diff del").allTextContents(), ["[removed: two ]"]);
    assert.deepEqual(await diff.locator(".diff ins").allTextContents(), ["[added: three ]", "[added: Sorry for the wait.]"]);
    const whole = (await diff.locator(".diff").textContent()).replace(/\[(removed|added): ([^\]]*)\]/g, (_, kind, words) => (kind === "added" ? words : ""));
    assert.equal(whole, sent, "the same words and the added ones read as the reply");
    // What a sighted reader sees: the markers are for screen readers only.
    const marker = await diff.locator(".diff del .visually-hidden").first().boundingBox();
    assert.ok(!marker || marker.width <= 1, "the [removed: ] marker is visually hidden");
    await scan(page, "conversation: a reply changed from the draft, its diff open");
    await closePage("draft-diff-admin");

    // An expert: the reply as sent, no diff.
    const seen = await open("draft-diff-expert", "expert1@browser.test");
    assert.equal(await seen.message.locator(".draft-diff").count(), 0, "no diff for an expert");
    assert.equal(await seen.page.locator(".draft-diff").count(), 0);
    await scan(seen.page, "conversation: a changed reply seen by an expert");
    await closePage("draft-diff-expert");
  });
}
