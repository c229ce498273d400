// The console's shell: session, routes (`#/queue`, `#/queue/<item>`, `#/admin/…`), the
// connection indicator, and the keyboard shortcuts.

import "./styles.css";
import { h, mount, typing } from "./dom";
import { clock } from "./format";
import { Realtime, latestSeq, type LinkStatus } from "./realtime";
import { type Session, expire, logout, onSessionChange, restore, role, selectOrg, session } from "./session";
import { Store } from "./store";
import { connectionsScreen, deadLettersScreen, inboundScreen } from "./views/admin";
import { type AlertsBanner, alertsBanner } from "./views/alerts";
import { type DetailPane, detailPane } from "./views/detail";
import { pauseControl } from "./views/autopilot";
import { renderLogin } from "./views/login";
import { Notifier, priorState } from "./notify";
import { presence } from "./presence";
import { settingsControls } from "./views/settings";
import { orgSettingsScreen } from "./views/org-settings";
import { accountRoute, changePasswordDialog, renderAccept, renderReset } from "./views/account";
import { membersScreen } from "./views/members";
import { savedRepliesScreen } from "./views/saved-replies-admin";
import { type QueuePane, queuePane } from "./views/queue";

const root = document.getElementById("app") as HTMLElement;

interface Shell {
  session: Session;
  store: Store;
  realtime: Realtime;
  queue: QueuePane;
  detail: DetailPane | null;
  main: HTMLElement;
  link: HTMLElement;
  help: HTMLDialogElement;
  /** Open alerts, for admins. */
  alerts: AlertsBanner | null;
}

let shell: Shell | null = null;
/** Background-tab alerts; a click on one opens its item. */
const notifier = new Notifier((id) => go(`#/queue/${id}`));

function route(): { page: string; id: string | null } {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "admin") return { page: `admin/${parts[1] ?? "connections"}`, id: null };
  if (parts[0] === "reports") return { page: "reports", id: null };
  return { page: "queue", id: parts[0] === "queue" && parts[1] ? parts[1] : null };
}

function go(hash: string): void {
  if (location.hash !== hash) location.hash = hash;
  else render();
}

function showLink(el: HTMLElement, s: LinkStatus): void {
  const text: Record<string, string> = {
    connecting: "Connecting…",
    live: "Live",
    reconnecting: `Connection lost${s.since ? ` at ${clock(s.since)}` : ""} — reconnecting…`,
    "catching-up": "Reconnected — catching up…",
  };
  el.dataset.state = s.state;
  el.dataset.caughtUp = String(s.caughtUp);
  el.title = s.detail ?? (s.state === "live" && s.caughtUp ? `Caught up on ${s.caughtUp} missed event(s)` : "");
  mount(
    el,
    h("span", { class: "dot", "aria-hidden": "true" }),
    text[s.state],
    s.state === "live" && s.caughtUp > 0 ? h("span", { class: "muted", text: ` · caught up ${s.caughtUp}` }) : null,
  );
}

async function start(s: Session): Promise<void> {
  shell?.realtime.stop();
  shell?.alerts?.stop();
  const store = new Store(s.orgId, s.user.id);
  const link = h("p", { class: "link-state", id: "link-state", role: "status", "aria-live": "polite" });
  const isAdmin = role() === "admin";
  const nav = h(
    "nav",
    { "aria-label": "Sections" },
    h("a", { href: "#/queue", "data-page": "queue", text: "Queue" }),
    isAdmin ? h("a", { href: "#/admin/connections", "data-page": "admin/connections", text: "Connections" }) : null,
    isAdmin ? h("a", { href: "#/admin/dead-letters", "data-page": "admin/dead-letters", text: "Dead letters" }) : null,
    isAdmin ? h("a", { href: "#/admin/inbound", "data-page": "admin/inbound", text: "Inbound events" }) : null,
    isAdmin ? h("a", { href: "#/reports", "data-page": "reports", text: "Reports" }) : null,
    isAdmin ? h("a", { href: "#/admin/members", "data-page": "admin/members", text: "Members" }) : null,
    isAdmin ? h("a", { href: "#/admin/saved-replies", "data-page": "admin/saved-replies", text: "Saved replies" }) : null,
    isAdmin ? h("a", { href: "#/admin/org", "data-page": "admin/org", text: "Org settings" }) : null,
  );
  const orgSelect =
    s.orgs.length > 1
      ? h(
          "select",
          { id: "org", "aria-label": "Org", on: { change: (e) => selectOrg((e.target as HTMLSelectElement).value) } },
          s.orgs.map((m) => h("option", { value: m.org_id, selected: m.org_id === s.orgId, text: `${m.org_id.slice(0, 8)} (${m.role})` })),
        )
      : null;
  const help = h(
    "dialog",
    { class: "help", "aria-labelledby": "help-title" },
    h("h2", { id: "help-title", text: "Keyboard shortcuts" }),
    h(
      "dl",
      {},
      [
        ["j / ↓, k / ↑", "next / previous item"],
        ["Enter", "open the item"],
        ["c", "claim"],
        ["u", "unclaim"],
        ["e", "edit the reply"],
        ["Ctrl+Enter", "release (or send your own reply)"],
        ["s", "snooze (pick a time, then s or Enter)"],
        ["x", "resolve"],
        ["o", "reopen"],
        ["t", "stop the autopilot (an item about to send itself)"],
        ["/", "search"],
        ["/ in the reply box", "insert a saved reply (↑ ↓, Enter, Esc)"],
        ["Esc", "back to the queue"],
        ["?", "this help"],
      ].flatMap(([k, v]) => [h("dt", {}, h("kbd", { text: k })), h("dd", { text: v })]),
    ),
    h("form", { method: "dialog" }, h("button", { class: "primary", text: "Close" })),
  );
  const main = h("main", { id: "main", class: "main" });
  const settings = settingsControls(notifier);
  const alerts = isAdmin ? alertsBanner() : null;
  const passwordDialog = changePasswordDialog();
  mount(
    root,
    h("a", { class: "skip", href: "#main", text: "Skip to content", on: { click: (e) => { e.preventDefault(); main.focus(); } } }),
    h(
      "header",
      { class: "topbar" },
      h("span", { class: "brand" }, h("span", { class: "logo", "aria-hidden": "true" }), "Switchboard"),
      nav,
      h("span", { class: "spacer" }),
      link,
      isAdmin ? pauseControl(s.orgId) : null,
      orgSelect,
      h("span", { class: "user", text: s.user.email }),
      settings.button,
      h("button", { type: "button", class: "link", "aria-label": "Keyboard shortcuts", text: "?", on: { click: () => help.showModal() } }),
      h("button", { type: "button", id: "change-password-open", on: { click: () => passwordDialog.showModal() }, text: "Change password" }),
      h("button", { type: "button", id: "logout", on: { click: () => logout() }, text: "Log out" }),
    ),
    alerts?.el,
    main,
    help,
    settings.dialog,
    passwordDialog,
  );
  main.tabIndex = -1;
  showLink(link, { state: "connecting", since: null, caughtUp: 0, detail: null });

  const queue = queuePane(store, (item) => go(`#/queue/${item.id}`));
  shell = { session: s, store, realtime: null as unknown as Realtime, queue, detail: null, main, link, help, alerts };
  render();

  // Numbers first, then the lists: any event after this number is applied on top of them.
  let seq = 0;
  try {
    seq = await latestSeq(s.orgId);
    await store.load();
  } catch (e) {
    store.error = `Could not load the queue: ${(e as Error).message}`;
  }
  if (shell?.store !== store) return;
  const realtime = new Realtime(s.token, s.orgId, seq, {
    apply: (event) => {
      notifier.consider(event, priorState(event, (id) => store.get(id)));
      store.apply(event);
    },
    resync: async () => {
      await store.load();
    },
    status: (st) => showLink(link, st),
    refused: (reason) => expire(`The live connection was refused (${reason}). Please log in again.`),
  });
  shell.realtime = realtime;
  presence.bind(realtime);
  realtime.start();
  performance.mark("sb-queue-ready");
}

function render(): void {
  if (!shell) return;
  const { page, id } = route();
  for (const a of shell.main.ownerDocument.querySelectorAll<HTMLAnchorElement>("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (page !== "queue") {
    shell.detail?.dispose();
    shell.detail = null;
    const screens: Record<string, (el: HTMLElement, org: string) => void> = {
      "admin/connections": connectionsScreen,
      "admin/dead-letters": deadLettersScreen,
      "admin/inbound": inboundScreen,
      // Loaded on first visit: the charts (Chart.js) are most of its weight.
      reports: (el, org) => void import("./views/reports").then((m) => m.reportsScreen(el, org)),
      "admin/members": (el, org) => membersScreen(el, org, shell?.session.user.id ?? ""),
      "admin/saved-replies": savedRepliesScreen,
      "admin/org": orgSettingsScreen,
    };
    const screen = h("div", { class: "admin-page" });
    mount(shell.main, screen);
    (screens[page] ?? connectionsScreen)(screen, shell.session.orgId);
    return;
  }
  if (shell.detail && shell.detail.itemId !== id) {
    shell.detail.dispose();
    shell.detail = null;
  }
  let opened = false;
  if (id && !shell.detail) {
    shell.detail = detailPane(shell.store, id, { isAdmin: role() === "admin", back: () => go("#/queue") });
    shell.queue.list.setActive(id);
    opened = true;
  }
  const layout = h(
    "div",
    { class: `workspace ${shell.detail ? "with-detail" : ""}` },
    shell.queue.el,
    shell.detail ? shell.detail.el : h("section", { class: "detail placeholder", "aria-label": "Conversation" }, h("p", { class: "muted", text: "Select an item (j/k, Enter) to see the conversation and its draft." })),
  );
  mount(shell.main, layout);
  shell.queue.list.render();
  if (!shell.detail) shell.queue.list.el.focus({ preventScroll: true });
  else if (opened) shell.detail.focus();
}

function onKey(e: KeyboardEvent): void {
  if (!shell || e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
  if (typing(e.target)) return;
  if (shell.help.open) return;
  const { page } = route();
  const detail = shell.detail;
  const key = e.key;
  if (key === "?") {
    shell.help.showModal();
  } else if (page !== "queue") {
    return;
  } else if (key === "/") {
    shell.queue.focusSearch();
  } else if (key === "j" || key === "k" || key === "ArrowDown" || key === "ArrowUp") {
    if (e.target === shell.queue.list.el) return; // the list handles its own keys
    shell.queue.list.move(key === "j" || key === "ArrowDown" ? 1 : -1);
    shell.queue.list.el.focus();
  } else if (key === "Enter" && e.target === document.body) {
    const item = shell.queue.list.active;
    if (item) go(`#/queue/${item.id}`);
  } else if (key === "Escape") {
    if (detail) {
      go("#/queue");
    }
  } else if (detail) {
    const actions: Record<string, () => void> = {
      c: () => detail.run("claim"),
      u: () => detail.run("unclaim"),
      x: () => detail.run("resolve"),
      o: () => detail.run("reopen"),
      t: () => detail.run("stop"),
      e: () => detail.focusComposer(),
      s: () => detail.run("snooze"),
    };
    if (!(key in actions)) return;
    actions[key]();
  } else {
    return;
  }
  e.preventDefault();
}

document.addEventListener("keydown", onKey);
// In the snooze picker, Enter or `s`-less confirmation: Enter snoozes.
document.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.target as HTMLElement | null)?.id === "snooze-until" && shell?.detail) {
    e.preventDefault();
    shell.detail.run("snooze");
  }
});
/** `#/accept/<token>` and `#/reset/<token>` stand in for the console, session or not. */
function accountPage(): boolean {
  const r = accountRoute(location.hash);
  if (!r) return false;
  shell?.realtime?.stop();
  shell?.detail?.dispose();
  shell?.alerts?.stop();
  shell = null;
  active = null;
  if (r.page === "accept") void renderAccept(root, r.token);
  else renderReset(root, r.token);
  return true;
}
window.addEventListener("hashchange", () => {
  if (accountPage()) return;
  const current = session();
  if (shell) render();
  else if (current) {
    active = { token: current.token, orgId: current.orgId };
    void start(current);
  }
  else renderLogin(root, null);
});

let active: { token: string; orgId: string } | null = null;
onSessionChange((s, reason) => {
  if (!s) {
    shell?.realtime?.stop();
    shell?.detail?.dispose();
    presence.unbind();
    shell?.alerts?.stop();
    shell = null;
    active = null;
    renderLogin(root, reason);
    return;
  }
  if (active && active.token === s.token && active.orgId === s.orgId) return;
  active = { token: s.token, orgId: s.orgId };
  void start(s);
});

if (!accountPage()) {
  const restored = restore();
  if (!restored) renderLogin(root, null);
}
performance.mark("sb-interactive");

