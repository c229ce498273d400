// The queue pane: filters with per-tab counts, the oldest waiting time, and the virtual
// list of items, longest waiting first.

import { h } from "../dom";
import { CHANNEL_LABEL, STATUS_LABEL, ago } from "../format";
import { type StatusTab, type Store, TABS, WORKING_SET_CAP } from "../store";
import type { Channel, Item } from "../types";
import { VirtualList } from "./vlist";

export const ROW_HEIGHT = 72;

export interface QueuePane {
  el: HTMLElement;
  list: VirtualList<Item>;
  focusSearch(): void;
  refresh(): void;
}

export function queuePane(store: Store, open: (item: Item) => void): QueuePane {
  const tabs = new Map<StatusTab, HTMLButtonElement>();
  const tabBar = h(
    "div",
    { class: "tabs", role: "group", "aria-label": "Status" },
    TABS.map(({ id, label }) => {
      const b = h("button", {
        type: "button",
        class: "tab",
        "data-tab": id,
        "aria-pressed": String(store.filters.status === id),
        on: { click: () => store.setFilters({ status: id }) },
      });
      b.append(h("span", { text: label }), h("span", { class: "count", "data-count": id }));
      tabs.set(id, b);
      return b;
    }),
  );

  const channel = h(
    "select",
    { id: "filter-channel", on: { change: () => store.setFilters({ channel: channel.value as Channel | "" }) } },
    h("option", { value: "", text: "All channels" }),
    (Object.keys(CHANNEL_LABEL) as Channel[]).map((c) => h("option", { value: c, text: CHANNEL_LABEL[c] })),
  );
  const flagged = h("input", {
    type: "checkbox",
    id: "filter-flagged",
    on: { change: () => store.setFilters({ flagged: flagged.checked }) },
  });
  const mine = h("input", {
    type: "checkbox",
    id: "filter-mine",
    on: { change: () => store.setFilters({ mine: mine.checked }) },
  });
  let searchTimer: number | undefined;
  const search = h("input", {
    type: "search",
    id: "filter-search",
    placeholder: "Search customers and messages  ( / )",
    on: {
      input: () => {
        window.clearTimeout(searchTimer);
        searchTimer = window.setTimeout(() => store.setFilters({ search: search.value.trim() }), 120);
      },
      keydown: (e) => {
        if ((e as KeyboardEvent).key === "Escape" || (e as KeyboardEvent).key === "Enter") {
          e.preventDefault();
          list.el.focus();
        }
      },
    },
  });
  const filters = h(
    "div",
    { class: "filters" },
    h("label", { class: "visually-hidden", for: "filter-search", text: "Search" }),
    search,
    h("label", { class: "visually-hidden", for: "filter-channel", text: "Channel" }),
    channel,
    h("label", { class: "check" }, flagged, "Flagged"),
    h("label", { class: "check" }, mine, "Mine"),
  );
  const summary = h("p", { class: "queue-summary", id: "queue-summary" });

  const list = new VirtualList<Item>({
    label: "Queue items",
    rowHeight: ROW_HEIGHT,
    key: (item) => item.id,
    stamp: (item) => `${item.version}|${item.updated_at}|${item.last_message?.at ?? ""}|${minute()}`,
    render: (item) => row(item, store.me),
    open,
    nearEnd: () => store.loadMore(),
    empty: () =>
      h(
        "div",
        { class: "empty", role: "presentation" },
        store.hasMore ? "Loading…" : "Nothing here. New items appear as soon as they arrive.",
      ),
  });

  const refresh = () => {
    const counts = store.counts();
    for (const [id, b] of tabs) {
      b.setAttribute("aria-pressed", String(store.filters.status === id));
      const count = b.querySelector(".count");
      if (count) {
        const more = (id === "resolved" && store.hasMore) || (id !== "resolved" && !store.complete);
        count.textContent = `${counts[id]}${more ? "+" : ""}`;
      }
    }
    const oldest = store.oldestPending();
    const parts = [`${counts.pending}${store.complete ? "" : "+"} pending`];
    parts.push(oldest ? `oldest waiting ${ago(oldest)}` : "nobody waiting");
    if (store.capped) parts.push(`showing the first ${WORKING_SET_CAP.toLocaleString()} open items`);
    if (store.error) parts.push(store.error);
    summary.textContent = parts.join(" · ");
    const rows = store.rows();
    list.setItems(rows);
    // For the browser test's timing: when the first rows were on screen.
    if (rows.length > 0 && performance.getEntriesByName("sb-first-rows").length === 0) performance.mark("sb-first-rows");
  };
  store.subscribe(refresh);
  // Waiting times move on by themselves.
  const tick = window.setInterval(() => (document.contains(list.el) ? refresh() : window.clearInterval(tick)), 30_000);

  const el = h(
    "section",
    { class: "queue-pane", "aria-label": "Queue" },
    h("h2", { class: "visually-hidden", text: "Queue" }),
    tabBar,
    filters,
    summary,
    list.el,
  );
  refresh();
  return { el, list, focusSearch: () => search.focus(), refresh };
}

function minute(): number {
  return Math.floor(Date.now() / 60_000);
}

function row(item: Item, me: string): HTMLElement {
  const name = item.customer.display_name || item.customer.external_id;
  const holder = item.claimed_by ? (item.claimed_by === me ? "you" : "another expert") : null;
  const el = h(
    "div",
    { class: `qrow status-${item.status}`, "data-item": item.id },
    h(
      "div",
      { class: "qrow-top" },
      h("span", { class: `chan chan-${item.channel}`, text: CHANNEL_LABEL[item.channel] }),
      h("span", { class: "qrow-name", text: name }),
      item.flagged ? h("span", { class: "flag", title: "Flagged for review", text: "⚑ review" }) : null,
      h("span", { class: "qrow-wait", title: `Waiting since ${new Date(item.created_at).toLocaleString()}`, text: ago(item.created_at) }),
    ),
    h(
      "div",
      { class: "qrow-bottom" },
      h("span", { class: "qrow-preview", text: item.last_message?.preview ?? "(no message)" }),
      h("span", {
        class: `chip chip-${item.status}`,
        text: holder && item.status === "claimed" ? `Claimed · ${holder}` : STATUS_LABEL[item.status],
      }),
    ),
  );
  return el;
}

