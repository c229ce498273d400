// Account pages: accepting an invitation (`#/accept/<token>`), setting a new password from
// a reset link (`#/reset/<token>`), asking for that link ("Forgot password?" on the login
// view), and changing one's own password (a dialog from the top bar). The first three are
// reached without a session.

import { ApiError } from "../api";
import { h, mount, submitForm } from "../dom";
import { account } from "../endpoints";
import { adoptToken } from "../session";

/** The fewest characters a password may have (the server's rule). */
export const PASSWORD_MIN = 8;

/** The account page a hash names, if any: `#/accept/<token>` or `#/reset/<token>`. */
export function accountRoute(hash: string): { page: "accept" | "reset"; token: string } | null {
  const m = /^#\/(accept|reset)\/([A-Za-z0-9_-]+)$/.exec(hash);
  return m ? { page: m[1] as "accept" | "reset", token: m[2] } : null;
}

/** What a refused token or password means, in words. */
export function accountProblem(e: unknown): string {
  if (e instanceof ApiError) {
    const known: Record<string, string> = {
      invitation_used: "This invitation was accepted already: log in instead.",
      invitation_expired: "This invitation has expired: ask an admin for a new one.",
      invitation_revoked: "This invitation was withdrawn: ask an admin for a new one.",
      invitation_not_found: "This invitation link is not valid: check that you copied all of it.",
      reset_used: "This reset link was used already: ask for a new one.",
      reset_expired: "This reset link has expired (links work for an hour): ask for a new one.",
      reset_not_found: "This reset link is not valid: ask for a new one.",
      wrong_password: "The current password is not right.",
      user_deactivated: "This account is deactivated: ask an administrator.",
    };
    if (known[e.code]) return known[e.code];
    if (e.status === 401) return "That is not the password of this account.";
    if (e.status === 429) return "Too many attempts. Wait a few minutes and try again.";
    if (e.status === 422) return e.message;
  }
  return `Something went wrong: ${(e as Error).message}`;
}

function card(titleId: string, title: string, ...children: (HTMLElement | null)[]): HTMLElement {
  return h(
    "main",
    { class: "login" },
    h("section", { class: "login-card", "aria-labelledby": titleId }, h("h1", { id: titleId, text: title }), ...children),
  );
}

function passwordField(id: string, label: string, autocomplete: string): [HTMLElement, HTMLInputElement] {
  const input = h("input", { id, type: "password", autocomplete, required: true, minlength: String(PASSWORD_MIN) });
  return [h("div", { class: "field" }, h("label", { for: id, text: label }), input), input];
}

const backToLogin = (): HTMLElement => h("p", {}, h("a", { href: "#/", text: "Back to the login page" }));

/** `#/accept/<token>`: who is invited where, then a password (new, or the existing one). */
export async function renderAccept(root: HTMLElement, token: string): Promise<void> {
  const status = h("p", { role: "status", id: "accept-status", text: "Checking the invitation…" });
  mount(root, card("accept-title", "Join Switchboard", status));
  let preview: Awaited<ReturnType<typeof account.previewInvitation>>;
  try {
    preview = await account.previewInvitation({ token });
  } catch (e) {
    mount(root, card("accept-title", "Join Switchboard", h("p", { class: "form-error", role: "alert", id: "accept-error", text: accountProblem(e) }), backToLogin()));
    return;
  }
  const existing = preview.existing_account;
  const name = h("input", { id: "accept-name", autocomplete: "name", maxlength: "200" });
  const [pwField, password] = passwordField(
    "accept-password",
    existing ? "Your current password" : `Choose a password (at least ${PASSWORD_MIN} characters)`,
    existing ? "current-password" : "new-password",
  );
  if (existing) password.removeAttribute("minlength");
  const error = h("p", { class: "form-error", role: "alert", id: "accept-error" });
  const submit = h("button", { type: "submit", class: "primary", text: "Accept and log in" });
  const form = submitForm(
    {
      "aria-labelledby": "accept-title",
    },
    error,
    async () => {
      submit.disabled = true;
      try {
        const answer = await account.acceptInvitation({
          token,
          password: password.value,
          display_name: existing ? null : name.value.trim() || null,
        });
        history.replaceState(null, "", "#/queue");
        await adoptToken(answer.token, answer.expires_at, answer.org_id);
      } catch (e) {
        error.textContent = accountProblem(e);
        submit.disabled = false;
        password.select();
      }
    },
    h("input", { type: "email", hidden: true, autocomplete: "username", value: preview.email, "aria-hidden": "true", tabindex: "-1" }),
    existing ? null : h("div", { class: "field" }, h("label", { for: "accept-name", text: "Your name" }), name),
    pwField,
    error,
    submit,
  );
  mount(
    root,
    card(
      "accept-title",
      "Join Switchboard",
      h("p", {
        id: "accept-summary",
        text: `${preview.email} is invited to ${preview.org_name} as ${preview.role}.${existing ? " This address has an account already: enter its password to add the org to it." : ""}`,
      }),
      form,
    ),
  );
  (existing ? password : name).focus();
}

/** `#/reset/<token>`: a new password, then back to the login page. */
export function renderReset(root: HTMLElement, token: string): void {
  const [pwField, password] = passwordField("reset-password", `New password (at least ${PASSWORD_MIN} characters)`, "new-password");
  const error = h("p", { class: "form-error", role: "alert", id: "reset-error" });
  const submit = h("button", { type: "submit", class: "primary", text: "Set the password" });
  const form = submitForm(
    {
      "aria-labelledby": "reset-title",
    },
    error,
    async () => {
      submit.disabled = true;
      try {
        await account.confirmReset({ token, new_password: password.value });
        mount(
          root,
          card("reset-title", "Password set", h("p", { role: "status", id: "reset-done", text: "Your password is set, and every session you had is ended. Log in with the new password." }), backToLogin()),
        );
        root.querySelector<HTMLAnchorElement>("a")?.focus();
      } catch (e) {
        error.textContent = accountProblem(e);
        submit.disabled = false;
      }
    },
    pwField,
    error,
    submit,
  );
  mount(root, card("reset-title", "Set a new password", form, backToLogin()));
  password.focus();
}

/** "Forgot password?": asks for the link; the answer is the same whoever asks. */
export function forgotPasswordForm(prefill: string): HTMLElement {
  const email = h("input", { id: "forgot-email", type: "email", autocomplete: "username", required: true, value: prefill });
  const status = h("p", { role: "status", id: "forgot-status" });
  const submit = h("button", { type: "submit", text: "Send me a reset link" });
  return h(
    "form",
    {
      class: "forgot",
      "aria-label": "Forgot password",
      on: {
        submit: async (event) => {
          event.preventDefault();
          submit.disabled = true;
          try {
            await account.requestReset({ email: email.value.trim() });
            status.textContent = "If this address has an account, a reset link is on its way. It works once, within an hour.";
          } catch (e) {
            status.textContent = accountProblem(e);
          }
          submit.disabled = false;
        },
      },
    },
    h("div", { class: "field" }, h("label", { for: "forgot-email", text: "Email" }), email),
    status,
    submit,
  );
}

/** The "Change password" dialog; it stays in the page and is opened with `showModal`. */
export function changePasswordDialog(): HTMLDialogElement {
  const [currentField, current] = passwordField("pw-current", "Current password", "current-password");
  current.removeAttribute("minlength");
  const [newField, next] = passwordField("pw-new", `New password (at least ${PASSWORD_MIN} characters)`, "new-password");
  const error = h("p", { class: "form-error", role: "alert", id: "pw-error" });
  const submit = h("button", { type: "submit", class: "primary", text: "Change password" });
  const dialog = h("dialog", { class: "help", id: "change-password", "aria-labelledby": "pw-title" });
  const form = submitForm(
    {
    },
    error,
    async () => {
      submit.disabled = true;
      try {
        const answer = await account.changePassword({ current_password: current.value, new_password: next.value });
        form.reset();
        dialog.close();
        await adoptToken(answer.token, answer.expires_at, null);
      } catch (e) {
        error.textContent = accountProblem(e);
      }
      submit.disabled = false;
    },
    currentField,
    newField,
    h("p", { class: "muted", text: "Your other sessions end; this one goes on." }),
    error,
    h("div", { class: "actions" }, h("button", { type: "button", text: "Cancel", on: { click: () => dialog.close() } }), submit),
  );
  mount(dialog, h("h2", { id: "pw-title", text: "Change password" }), form);
  return dialog;
}
