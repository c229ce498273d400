// Members and accounts in the browser: an admin invites on the Members page and copies the
// link; the invitee accepts it (a new account) and is logged in; changes their password;
// the admin deactivates them (their console drops to the login page) and reactivates them
// through the confirm dialog; "Forgot password?" and a dead reset link. Every new view and
// state is scanned by axe. Registered by run.mjs.

import assert from "node:assert/strict";
import { LB, PASSWORD, api, login, test, waitFor } from "./lib.mjs";

/** `newPage(label)` and `scan(page, label)` are run.mjs's. */
export function membersTests({ newPage, scan, closePage }) {
  const email = `invitee-${Math.random().toString(36).slice(2, 8)}@browser.test`;
  const first = "invitee password 1";
  const second = "invitee password 2";

  test("members: invite → accept → logged in as the new member; change password; deactivate and reactivate", async () => {
    const admin = await newPage("members-admin");
    await admin.goto(`${LB}/`);
    await admin.fill("#login-email", "admin@browser.test");
    await admin.fill("#login-password", PASSWORD);
    await admin.click('button[type="submit"]');
    await admin.locator('#link-state[data-state="live"]').waitFor({ timeout: 15_000 });
    await admin.click('nav a[data-page="admin/members"]');
    await admin.locator("#members-status", { hasText: "member" }).waitFor();
    await scan(admin, "members page");

    // Keyboard only: the invite form.
    await admin.focus("#invite-email");
    await admin.keyboard.type(email);
    await admin.keyboard.press("Tab");
    await admin.selectOption("#invite-role", "expert");
    await admin.focus("#invite-email");
    await admin.keyboard.press("Enter");
    await admin.locator("#invite-link").waitFor();
    const link = await admin.inputValue("#invite-link");
    assert.match(link, /\/#\/accept\/[A-Za-z0-9_-]{43}$/);
    await admin.locator("#invitations td", { hasText: email }).waitFor();
    await scan(admin, "members page with an invitation link");

    // The invitee, in a browser of their own.
    const invitee = await newPage("members-invitee");
    await invitee.goto(link);
    await invitee.locator("#accept-summary", { hasText: email }).waitFor();
    await scan(invitee, "accept invitation page");
    await invitee.fill("#accept-name", "Ivy Invitee");
    await invitee.fill("#accept-password", "short");
    await invitee.click('button[type="submit"]');
    // The browser's own minlength check, or the server's 422: either way not accepted.
    assert.equal(await invitee.locator("#link-state").count(), 0);
    await invitee.fill("#accept-password", first);
    await invitee.click('button[type="submit"]');
    await invitee.locator('#link-state[data-state="live"]').waitFor({ timeout: 15_000 });
    assert.equal(await invitee.textContent(".topbar .user"), email);

    // The link works once.
    const again = await newPage("members-again");
    await again.goto(link);
    await again.locator("#accept-error", { hasText: "accepted already" }).waitFor();
    await scan(again, "used invitation");
    await closePage("members-again");

    // Change password from the top bar; the session goes on with the fresh token.
    await invitee.click("#change-password-open");
    await invitee.locator("#change-password[open]").waitFor();
    await scan(invitee, "change password dialog");
    await invitee.fill("#pw-current", "wrong password");
    await invitee.fill("#pw-new", second);
    await invitee.click('#change-password button[type="submit"]');
    await invitee.locator("#pw-error", { hasText: "not right" }).waitFor();
    await invitee.fill("#pw-current", first);
    await invitee.click('#change-password button[type="submit"]');
    await waitFor("the dialog to close", async () => !(await invitee.locator("#change-password").evaluate((d) => d.open)));
    await invitee.locator('#link-state[data-state="live"]').waitFor({ timeout: 15_000 });
    const oldLogin = await api(LB, "POST", "/auth/login", { body: { email, password: first } });
    assert.equal(oldLogin.status, 401);

    // The admin deactivates them, through the confirm dialog: their console drops to login.
    // The page as it is now (the invitee joined since it was loaded).
    await admin.reload();
    const rowOf = () => admin.locator(`tr[data-member="${email}"]`);
    await rowOf().waitFor();
    await rowOf().getByRole("button", { name: `Deactivate ${email}` }).click();
    await admin.locator("#member-confirm[open]").waitFor();
    await scan(admin, "confirm dialog");
    await admin.locator("#member-confirm").getByRole("button", { name: "Deactivate" }).click();
    await admin.locator("#members-status", { hasText: "Done: deactivate" }).waitFor();
    await rowOf().locator(".member-status", { hasText: "Deactivated" }).waitFor();
    await invitee.locator("#login-reason").waitFor({ timeout: 15_000 });
    const refused = await api(LB, "POST", "/auth/login", { body: { email, password: second } });
    assert.equal(refused.body?.code, "user_deactivated");

    await rowOf().getByRole("button", { name: `Reactivate ${email}` }).click();
    await rowOf().locator(".member-status", { hasText: "Active" }).waitFor();
    await invitee.fill("#login-email", email);
    await invitee.fill("#login-password", second);
    await invitee.click('button[type="submit"]');
    await invitee.locator('#link-state[data-state="live"]').waitFor({ timeout: 15_000 });

    // The org's last admin is kept: demoting the only admin is refused with the reason.
    const token = await login("admin@browser.test");
    const me = await api(LB, "GET", "/auth/me", { token });
    const orgId = me.body.orgs.find((m) => m.role === "admin").org_id;
    const list = await api(LB, "GET", `/orgs/${orgId}/members`, { token });
    const admins = list.body.members.filter((m) => m.role === "admin" && !m.deactivated_at);
    if (admins.length === 1) {
      await admin.selectOption('select[data-member="admin@browser.test"]', "expert");
      await admin.locator("#members-status", { hasText: "at least one active admin" }).waitFor();
    }
    await closePage("members-invitee");
    await closePage("members-admin");
  });

  test("forgot password: the same answer for anyone; a dead reset link says so", async () => {
    const page = await newPage("members-forgot");
    await page.goto(`${LB}/`);
    await page.click("#forgot-toggle");
    await page.fill("#forgot-email", "nobody-here@browser.test");
    await page.click('#forgot button[type="submit"]');
    await page.locator("#forgot-status", { hasText: "If this address has an account" }).waitFor();
    await scan(page, "login with forgot password");
    await page.goto(`${LB}/#/reset/not-a-real-token`);
    await page.locator("#reset-password").waitFor();
    await scan(page, "reset password page");
    await page.fill("#reset-password", "a new password here");
    await page.click('button[type="submit"]');
    await page.locator("#reset-error", { hasText: "not valid" }).waitFor();
    await scan(page, "reset password refused");
    await closePage("members-forgot");
  });
}
