// What the detail pane shows around the conversation: who else has it open (presence), and
// the customer's other conversations with how each ended (customer context), each of which
// the expert can open: its messages inline, and its live item in the queue. For an org
// admin, the customer's data: export everything held about them, or erase them (after a
// confirmation that names what goes).

import { uuid } from "../api";
import { h, mount } from "../dom";
import { customers, conversations } from "../endpoints";
import { CHANNEL_LABEL, STATUS_LABEL, ago, clock } from "../format";
import { presence } from "../presence";
import type { Item, QueueStatus, Schemas } from "../types";
import { confirmDialog } from "./confirm";

type CustomerConversation = Schemas["CustomerConversation"];
type Erasure = Schemas["ErasureView"];

export interface ExtrasOptions {
  /** Offer the customer's export and erasure (the server refuses them to experts anyway). */
  isAdmin: boolean;
  /** The customer is erased: the conversation is gone, leave it. */
  erased(): void;
}

export interface ConversationExtras {
  el: HTMLElement;
  /** The item is known: show its presence and its customer's conversations. */
  show(item: Item): void;
  dispose(): void;
}

/** "Ann is also viewing", "Ann and Bob are also viewing", "Ann, Bob and 2 others …". */
export function viewingText(names: string[]): string {
  if (names.length === 0) return "";
  const verb = names.length === 1 ? "is" : "are";
  if (names.length <= 2) return `${names.join(" and ")} ${verb} also viewing`;
  return `${names.slice(0, 2).join(", ")} and ${names.length - 2} other${names.length > 3 ? "s" : ""} are also viewing`;
}

/** "3 conversations, 41 messages, 2 notes" from an erasure's counts, zeros left out. */
export function erasedText(counts: Erasure["counts"]): string {
  if (!counts) return "";
  const parts: [number, string][] = [
    [counts.conversations, "conversation"],
    [counts.messages, "message"],
    [counts.drafts, "draft"],
    [counts.conversation_notes, "note"],
    [counts.outbox, "reply"],
    [counts.inbound_events, "inbox event"],
  ];
  const said = parts.filter(([n]) => n > 0).map(([n, what]) => `${n} ${what === "reply" && n !== 1 ? "replies" : what + (n === 1 ? "" : "s")}`);
  return said.length ? said.join(", ") : "nothing else was held";
}

export function conversationExtras(me: string, opts: ExtrasOptions): ConversationExtras {
  let conversationId: string | null = null;
  let disposed = false;
  const viewing = h("p", { class: "presence", id: "presence", role: "status", "aria-live": "polite" });
  const summary = h("summary", { text: "Customer history" });
  const list = h("ul", { class: "context-list", id: "customer-context", "aria-label": "The customer's conversations" });
  const context = h("details", { class: "context" }, summary, list);
  const dataStatus = h("p", { class: "status-line", id: "customer-data-status", role: "status", "aria-live": "polite" });
  const exportButton = h("button", { type: "button", id: "customer-export", text: "Export data", on: { click: () => void exportData() } });
  const eraseButton = h("button", { type: "button", class: "danger", id: "customer-erase", text: "Erase customer", on: { click: () => void erase() } });
  const data = opts.isAdmin
    ? h("div", { class: "customer-data", role: "group", "aria-label": "Customer data" }, exportButton, eraseButton, dataStatus)
    : null;
  const el = h("div", { class: "extras" }, viewing, context, data);
  let current: Item | null = null;
  /** The customer's conversations as last loaded, for the confirmation to count. */
  let known: Schemas["CustomerConversationPage"] | null = null;

  function renderPresence(): void {
    if (disposed || !conversationId) return;
    const others = presence.board.viewers(conversationId, me);
    viewing.hidden = others.length === 0;
    viewing.textContent = viewingText(others.map((v) => v.name));
  }
  renderPresence();
  const unsubscribe = presence.board.subscribe(renderPresence);

  function outcomeChip(outcome: string): HTMLElement {
    const label = STATUS_LABEL[outcome as QueueStatus] ?? outcome;
    return h("span", { class: `chip chip-${outcome}`, text: label });
  }

  function entry(c: CustomerConversation, current: Item): HTMLElement {
    const isCurrent = c.id === current.conversation_id;
    const transcript = h("ol", { class: "context-messages", hidden: true, "aria-label": "Messages, newest first" });
    const toggle = h("button", {
      type: "button",
      class: "link",
      "aria-expanded": "false",
      "data-conversation": c.id,
      text: "Show messages",
      on: {
        click: () => {
          const open = toggle.getAttribute("aria-expanded") === "true";
          toggle.setAttribute("aria-expanded", String(!open));
          toggle.textContent = open ? "Show messages" : "Hide messages";
          transcript.hidden = open;
          if (!open && !transcript.childElementCount) void loadTranscript(c.id, transcript);
        },
      },
    });
    return h(
      "li",
      { class: `context-item${isCurrent ? " current" : ""}`, "data-conversation": c.id },
      h(
        "div",
        { class: "context-row" },
        h("span", { class: `chan chan-${c.channel}`, text: CHANNEL_LABEL[c.channel] }),
        outcomeChip(c.outcome),
        h("span", { class: "muted", text: c.last_message_at ? `last message ${ago(c.last_message_at)} (${clock(c.last_message_at)})` : "no messages" }),
        isCurrent ? h("span", { class: "muted", text: "· this conversation" }) : null,
        h("span", { class: "spacer" }),
        !isCurrent && c.queue_item_id ? h("a", { href: `#/queue/${c.queue_item_id}`, text: "Open item" }) : null,
        isCurrent ? null : toggle,
      ),
      transcript,
    );
  }

  async function loadTranscript(id: string, into: HTMLElement): Promise<void> {
    mount(into, h("li", { class: "muted", text: "Loading…" }));
    try {
      const c = await conversations.get(id, { limit: 20 });
      if (disposed) return;
      mount(
        into,
        c.messages.length
          ? c.messages.map((m) =>
              h(
                "li",
                { class: `msg ${m.direction === "inbound" ? "in" : "out"}` },
                h("div", { class: "msg-meta" }, h("span", { class: "who", text: m.author === "customer" ? "Customer" : m.author === "agent" ? "Agent" : "Expert" }), h("time", { datetime: m.created_at, text: clock(m.created_at) })),
                h("p", { class: "msg-body", text: m.body }),
              ),
            )
          : h("li", { class: "muted", text: "No messages." }),
      );
    } catch (e) {
      mount(into, h("li", { class: "error", text: `Could not load the messages: ${(e as Error).message}` }));
    }
  }

  async function exportData(): Promise<void> {
    if (!current) return;
    exportButton.disabled = true;
    dataStatus.textContent = "Preparing the export…";
    try {
      const saved = await customers.exportData(current.customer.id);
      if (disposed) return;
      dataStatus.textContent = `Saved ${saved.filename} (${Math.max(1, Math.round(saved.bytes / 1024))} KB): everything held about this customer.`;
    } catch (e) {
      dataStatus.textContent = `Could not export: ${(e as Error).message}`;
    } finally {
      exportButton.disabled = false;
    }
  }

  async function erase(): Promise<void> {
    if (!current) return;
    const item = current;
    const name = item.customer.display_name || item.customer.external_id;
    const conversationsHeld = known ? `${known.items.length}${known.next_cursor ? " or more" : ""}` : "all";
    const ok = await confirmDialog(
      [
        h("p", { text: `Erase ${name} (${CHANNEL_LABEL[item.channel]} ${item.customer.external_id}) for good? This cannot be undone. It removes:` }),
        h(
          "ul",
          { id: "erase-what" },
          [
            "the customer record: name, number or address, the provider's user id",
            `their conversations (${conversationsHeld}) with every message they wrote and every reply sent to them`,
            "the agent's drafts, internal notes and queue items of those conversations",
            "replies waiting to be sent, dead letters and the provider's error texts",
            "their inbox events and the stored answers of requests about them",
          ].map((t) => h("li", { text: t })),
        ),
        h("p", { text: "A reply being sent is delivered first. The audit log keeps who erased this customer's id, when, and how many rows went: no name, number or text." }),
      ],
      "Erase customer",
      "erase-confirm",
    );
    if (!ok || disposed) return;
    exportButton.disabled = true;
    eraseButton.disabled = true;
    dataStatus.textContent = "Erasing…";
    try {
      let erasure = await customers.erase(item.customer.id, uuid());
      // Pending while a reply in flight finishes: the scheduled job ends it.
      for (let waited = 0; erasure.status !== "done" && waited < 120 && !disposed; waited++) {
        dataStatus.textContent = "Erasure recorded: it finishes once the reply being sent is delivered…";
        await new Promise((resolve) => setTimeout(resolve, 1000));
        erasure = await customers.erasure(item.customer.id);
      }
      if (disposed) return;
      if (erasure.status !== "done") {
        dataStatus.textContent = "Erasure recorded: it finishes in the background.";
        return;
      }
      dataStatus.textContent = `Erased: ${erasedText(erasure.counts)}.`;
      opts.erased();
    } catch (e) {
      dataStatus.textContent = `Could not erase: ${(e as Error).message}`;
      exportButton.disabled = false;
      eraseButton.disabled = false;
    }
  }

  async function loadContext(item: Item): Promise<void> {
    mount(list, h("li", { class: "muted", text: "Loading…" }));
    try {
      const page = await customers.conversations(item.customer.id, { limit: 20 });
      if (disposed) return;
      known = page;
      const earlier = page.items.filter((c) => c.id !== item.conversation_id).length;
      summary.textContent = earlier
        ? `Customer history: ${earlier} other conversation${earlier === 1 ? "" : "s"}${page.next_cursor ? " (most recent shown)" : ""}`
        : "Customer history: no other conversations";
      mount(list, page.items.map((c) => entry(c, item)));
    } catch (e) {
      summary.textContent = "Customer history";
      mount(list, h("li", { class: "error", text: `Could not load the customer's conversations: ${(e as Error).message}` }));
    }
  }

  return {
    el,
    show(item: Item): void {
      if (disposed) return;
      const first = conversationId !== item.conversation_id;
      conversationId = item.conversation_id;
      current = item;
      presence.view(conversationId);
      renderPresence();
      if (first) void loadContext(item);
    },
    dispose(): void {
      disposed = true;
      unsubscribe();
      if (conversationId) presence.view(null);
    },
  };
}
