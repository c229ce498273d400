// Open alerts, for admins: a banner under the top bar listing each open incident (severity,
// kind, summary, when it opened, and what it means behind a disclosure), from
// `GET /alerts?status=open` on load and every 30 s while the tab is visible. Nothing shows
// when none is open. The banner is a polite live region, redrawn only when the incidents
// change, so a screen reader hears a new or cleared alert once, not every refresh.

import { ApiError } from "../api";
import { h, mount } from "../dom";
import { alerts as alertsApi } from "../endpoints";
import { clock } from "../format";
import type { Schemas } from "../types";

export type Alert = Schemas["AlertView"];
export type Severity = Schemas["Severity"];

/** How often the banner asks again while the tab is visible. */
export const REFRESH_MS = 30_000;

const SEVERITY_LABEL: Record<Severity, string> = {
  critical: "Critical",
  warning: "Warning",
  info: "Info",
};
const SEVERITY_RANK: Record<Severity, number> = { critical: 0, warning: 1, info: 2 };

/** Where in the console an admin acts on some kinds. */
const ACTION: Partial<Record<Alert["kind"], { href: string; text: string }>> = {
  reply_dead: { href: "#/admin/dead-letters", text: "Dead letters" },
  queue_backlog: { href: "#/admin/inbound", text: "Inbound events" },
};

/** One open incident as the banner shows it. */
export interface AlertLine {
  id: string;
  severity: Severity;
  severityLabel: string;
  kind: Alert["kind"];
  summary: string;
  /** When it opened, e.g. `14:02` today or `May 3, 14:02`. */
  opened: string;
  openedAt: string;
  meaning: string;
  runbook: string;
  action: { href: string; text: string } | null;
}

/** The open incidents to show: the most severe first, then the newest (then by id, so the
 * same incidents always come in the same order). */
export function alertLines(alerts: Alert[], when: (iso: string) => string = clock): AlertLine[] {
  return alerts
    .filter((a) => a.status === "open")
    .sort(
      (a, b) =>
        SEVERITY_RANK[a.severity] - SEVERITY_RANK[b.severity] ||
        Date.parse(b.opened_at) - Date.parse(a.opened_at) ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    )
    .map((a) => ({
      id: a.id,
      severity: a.severity,
      severityLabel: SEVERITY_LABEL[a.severity] ?? a.severity,
      kind: a.kind,
      summary: a.summary,
      opened: when(a.opened_at),
      openedAt: a.opened_at,
      meaning: a.meaning,
      runbook: a.runbook,
      action: ACTION[a.kind] ?? null,
    }));
}

/** The banner's heading: `1 open alert` or `3 open alerts (2 critical)`; empty when none. */
export function alertsHeading(lines: AlertLine[]): string {
  if (!lines.length) return "";
  const critical = lines.filter((l) => l.severity === "critical").length;
  const count = `${lines.length} open alert${lines.length === 1 ? "" : "s"}`;
  return critical && critical < lines.length ? `${count} (${critical} critical)` : count;
}

/** What decides whether the banner must be redrawn (and so announced again). */
export function alertsKey(lines: AlertLine[]): string {
  return lines.map((l) => `${l.id}|${l.severity}|${l.summary}|${l.opened}`).join("\n");
}

function lineView(l: AlertLine, open: boolean): HTMLElement {
  return h(
    "li",
    { class: "alert-line", "data-id": l.id, "data-kind": l.kind, "data-severity": l.severity },
    h("span", { class: `severity sev-${l.severity}`, text: l.severityLabel }),
    h("code", { class: "alert-kind", text: l.kind }),
    h("span", { class: "alert-summary", text: l.summary }),
    h("span", { class: "muted" }, "opened ", h("time", { datetime: l.openedAt, title: l.openedAt, text: l.opened })),
    l.action ? h("a", { href: l.action.href, text: l.action.text }) : null,
    h(
      "details",
      { class: "alert-meaning", open },
      h("summary", {}, "What it means", h("span", { class: "visually-hidden", text: ` (${l.kind})` })),
      h("p", { text: l.meaning }),
      h("p", { class: "muted" }, "Runbook: ", h("code", { text: l.runbook })),
    ),
  );
}

export interface AlertsBanner {
  el: HTMLElement;
  /** Asks the server now. */
  refresh(): Promise<void>;
  /** No more requests (the session ended or changed). */
  stop(): void;
}

/** The admin's banner; it starts asking at once. `load` is for tests. */
export function alertsBanner(
  load: () => Promise<Alert[]> = async () => (await alertsApi.list({ status: "open" })).alerts,
): AlertsBanner {
  const el = h("div", { class: "alerts-banner", id: "alerts-banner", role: "status", "aria-live": "polite" });
  let shown = "";
  let last = 0;
  let stopped = false;

  function show(alerts: Alert[]): void {
    const lines = alertLines(alerts);
    const key = alertsKey(lines);
    if (key === shown) return;
    shown = key;
    // A redraw keeps what the admin had opened, and their focus on it.
    const open = new Set(
      Array.from(el.querySelectorAll("details[open]"), (d) => d.closest<HTMLElement>("li.alert-line")?.dataset.id),
    );
    const focused = (document.activeElement as HTMLElement | null)?.closest<HTMLElement>("li.alert-line");
    const focusedId = focused && el.contains(focused) ? focused.dataset.id : null;
    if (!lines.length) {
      mount(el);
      return;
    }
    mount(
      el,
      h(
        "section",
        { class: "alerts-inner", "aria-labelledby": "alerts-title" },
        h("h2", { id: "alerts-title", text: alertsHeading(lines) }),
        h("ul", {}, lines.map((l) => lineView(l, open.has(l.id)))),
      ),
    );
    if (focusedId) {
      el.querySelector<HTMLElement>(`li.alert-line[data-id="${CSS.escape(focusedId)}"] summary`)?.focus();
    }
  }

  async function refresh(): Promise<void> {
    last = Date.now();
    try {
      const alerts = await load();
      if (!stopped) show(alerts);
    } catch (e) {
      // Not (or no longer) an admin: nothing to show, and nothing to ask again. Any other
      // failure keeps what is shown until the next refresh.
      if (e instanceof ApiError && (e.status === 403 || e.status === 401)) {
        show([]);
        stop();
      }
    }
  }

  const visible = () => document.visibilityState === "visible";
  const timer = setInterval(() => {
    if (visible()) void refresh();
  }, REFRESH_MS);
  // Back on the tab after a while: ask at once instead of at the next tick.
  const onVisibility = () => {
    if (visible() && Date.now() - last >= REFRESH_MS) void refresh();
  };
  document.addEventListener("visibilitychange", onVisibility);

  function stop(): void {
    stopped = true;
    clearInterval(timer);
    document.removeEventListener("visibilitychange", onVisibility);
  }

  void refresh();
  return { el, refresh, stop };
}
