import { ApiError } from "../api";
import { h, mount, submitForm } from "../dom";
import { login } from "../session";
import { forgotPasswordForm } from "./account";

/** The login screen; `reason` says why the expert is here (expired, logged out). */
export function renderLogin(root: HTMLElement, reason: string | null): void {
  const email = h("input", { id: "login-email", type: "email", name: "email", autocomplete: "username", required: true });
  const password = h("input", {
    id: "login-password",
    type: "password",
    name: "password",
    autocomplete: "current-password",
    required: true,
  });
  const error = h("p", { class: "form-error", role: "alert", id: "login-error" });
  const submit = h("button", { type: "submit", class: "primary", text: "Log in" });
  const form = submitForm(
    {
      class: "login-card",
      "aria-labelledby": "login-title",
    },
    error,
    async () => {
      submit.disabled = true;
      submit.textContent = "Logging in…";
      try {
        await login(email.value.trim(), password.value);
      } catch (e) {
        error.textContent =
          e instanceof ApiError && e.status === 401
            ? "Wrong email or password."
            : e instanceof ApiError && e.status === 429
              ? "Too many failed attempts. Wait a few minutes and try again."
              : `Could not log in: ${(e as Error).message}`;
        submit.disabled = false;
        submit.textContent = "Log in";
        password.select();
      }
    },
    h("h1", { id: "login-title" }, h("span", { class: "logo", "aria-hidden": "true" }), "Switchboard"),
    h("p", { class: "muted", text: "Expert console" }),
    reason ? h("p", { class: "notice", role: "status", id: "login-reason", text: reason }) : null,
    h("label", { for: "login-email", text: "Email" }),
    email,
    h("label", { for: "login-password", text: "Password" }),
    password,
    error,
    submit,
  );
  const forgot = h("div", { id: "forgot" });
  const forgotToggle = h("button", {
    type: "button",
    class: "link",
    id: "forgot-toggle",
    text: "Forgot password?",
    "aria-expanded": "false",
    "aria-controls": "forgot",
    on: {
      click: () => {
        const open = forgotToggle.getAttribute("aria-expanded") !== "true";
        forgotToggle.setAttribute("aria-expanded", String(open));
        mount(forgot, open ? forgotPasswordForm(email.value.trim()) : null);
        if (open) forgot.querySelector("input")?.focus();
      },
    },
  });
  mount(root, h("main", { class: "login" }, form, h("section", { class: "login-card forgot-card", "aria-label": "Password help" }, forgotToggle, forgot)));
  email.focus();
}
