// The org's settings page for admins (`#/admin/org`): how long the org keeps its customers'
// conversations (the retention window the `org-retention` job enforces), and the audit log
// to download (a date range and an action, as CSV or NDJSON).

import { ApiError } from "../api";
import { h, mount } from "../dom";
import { audit, reports } from "../endpoints";
import type { Schemas } from "../types";

/** The longest window the server takes (ten years). */
export const MAX_RETENTION_DAYS = 3650;

/** What the retention field asks the server for, or why it cannot. */
export function retentionChoice(keepAll: boolean, days: string): { days: number | null } | { problem: string } {
  if (keepAll) return { days: null };
  const n = Number(days);
  if (days.trim() === "" || !Number.isInteger(n) || n < 1 || n > MAX_RETENTION_DAYS) {
    return { problem: `The window is a whole number of days from 1 to ${MAX_RETENTION_DAYS}, or keep everything.` };
  }
  return { days: n };
}

/** "kept for 30 days" / "kept until erased". */
export function retentionText(days: number | null | undefined): string {
  if (days === null || days === undefined) return "Conversations are kept until a customer is erased.";
  return `Messages, drafts, notes, inbox events and delivery records older than ${days} day${days === 1 ? "" : "s"} are deleted; aggregates for the reports stay as numbers.`;
}

/** The audit query of the form: whole days in the browser's time zone, `until` inclusive. */
export function auditRange(since: string, until: string): { since?: string; until?: string } | { problem: string } {
  const from = since ? new Date(`${since}T00:00:00`) : null;
  const to = until ? new Date(`${until}T00:00:00`) : null;
  if (to) to.setDate(to.getDate() + 1);
  if (from && to && from >= to) return { problem: "The first day must not be after the last." };
  return { since: from?.toISOString(), until: to?.toISOString() };
}

function retentionForm(orgId: string, view: Schemas["SettingsView"]): HTMLElement {
  const days = h("input", {
    id: "retention-days",
    type: "number",
    min: "1",
    max: String(MAX_RETENTION_DAYS),
    step: "1",
    value: view.retention_days ? String(view.retention_days) : "",
    "aria-describedby": "retention-note",
  });
  const keepAll = h("input", {
    id: "retention-keep",
    type: "checkbox",
    checked: view.retention_days === null || view.retention_days === undefined,
    on: { change: () => (days.disabled = keepAll.checked) },
  });
  days.disabled = keepAll.checked;
  const note = h("p", { class: "status-line", id: "retention-note", role: "status", text: retentionText(view.retention_days) });
  const error = h("p", { class: "form-error", id: "retention-error", role: "alert" });
  return h(
    "form",
    {
      class: "admin-form retention-form",
      "aria-labelledby": "retention-title",
      novalidate: true,
      on: {
        submit: async (e) => {
          e.preventDefault();
          const choice = retentionChoice(keepAll.checked, days.value);
          if ("problem" in choice) {
            error.textContent = choice.problem;
            days.setAttribute("aria-invalid", "true");
            return;
          }
          error.textContent = "";
          days.setAttribute("aria-invalid", "false");
          try {
            const saved = await reports.updateSettings(orgId, { retention_days: choice.days });
            note.textContent = `Saved. ${retentionText(saved.retention_days)}`;
          } catch (err) {
            error.textContent = `Could not save: ${(err as Error).message}`;
          }
        },
      },
    },
    h("h3", { id: "retention-title", text: "Retention" }),
    h("div", { class: "check" }, keepAll, h("label", { for: "retention-keep", text: "Keep everything until a customer is erased" })),
    h("div", { class: "field" }, h("label", { for: "retention-days", text: "Keep conversations for (days)" }), days),
    h("button", { type: "submit", class: "primary", text: "Save" }),
    error,
    note,
  );
}

function auditForm(orgId: string): HTMLElement {
  const since = h("input", { id: "audit-since", type: "date" });
  const until = h("input", { id: "audit-until", type: "date" });
  const action = h("input", { id: "audit-action", maxlength: "100", placeholder: "e.g. customer.erased", spellcheck: "false" });
  const format = h(
    "select",
    { id: "audit-format" },
    h("option", { value: "csv", text: "CSV (spreadsheets)" }),
    h("option", { value: "ndjson", text: "NDJSON (one JSON row per line)" }),
  );
  const status = h("p", { class: "status-line", id: "audit-status", role: "status", "aria-live": "polite" });
  const button = h("button", { type: "submit", class: "primary", text: "Download the audit log" });
  return h(
    "form",
    {
      class: "admin-form audit-form",
      "aria-labelledby": "audit-title",
      novalidate: true,
      on: {
        submit: async (e) => {
          e.preventDefault();
          const range = auditRange(since.value, until.value);
          if ("problem" in range) {
            status.textContent = range.problem;
            return;
          }
          button.disabled = true;
          status.textContent = "Downloading…";
          try {
            const saved = await audit.download(
              { org_id: orgId, action: action.value.trim() || undefined, ...range },
              format.value as "csv" | "ndjson",
            );
            status.textContent = `Saved ${saved.filename} (${Math.max(1, Math.round(saved.bytes / 1024))} KB).`;
          } catch (err) {
            status.textContent = `Could not download: ${(err as Error).message}`;
          } finally {
            button.disabled = false;
          }
        },
      },
    },
    h("h3", { id: "audit-title", text: "Audit log" }),
    h("p", { class: "muted", text: "Every expert action, connection, member and settings change, note, replay, retry, erasure and login of this org, oldest first." }),
    h("div", { class: "field" }, h("label", { for: "audit-since", text: "From (day)" }), since),
    h("div", { class: "field" }, h("label", { for: "audit-until", text: "To (day, included)" }), until),
    h("div", { class: "field" }, h("label", { for: "audit-action", text: "Only this action" }), action),
    h("div", { class: "field" }, h("label", { for: "audit-format", text: "Format" }), format),
    button,
    status,
  );
}

export function orgSettingsScreen(root: HTMLElement, orgId: string): void {
  const status = h("p", { role: "status", class: "status-line", text: "Loading…" });
  const body = h("div", { class: "org-settings" });
  mount(root, h("section", { class: "admin", "aria-labelledby": "org-settings-title" }, h("h2", { id: "org-settings-title", text: "Org settings" }), status, body));
  void (async () => {
    try {
      const view = await reports.settings(orgId);
      status.textContent = `${view.name}: days in ${view.time_zone}.`;
      mount(body, retentionForm(orgId, view), auditForm(orgId));
    } catch (e) {
      status.textContent =
        e instanceof ApiError && e.status === 403 ? "Only an admin of this org can change its settings." : `Could not load the settings: ${(e as Error).message}`;
    }
  })();
}
