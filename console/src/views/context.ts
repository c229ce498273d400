// What the detail pane shows around the conversation: who else has it open (presence), and
// the customer's other conversations with how each ended (customer context), each of which
// the expert can open: its messages inline, and its live item in the queue.

import { h, mount } from "../dom";
import { customers, conversations } from "../endpoints";
import { CHANNEL_LABEL, STATUS_LABEL, ago, clock } from "../format";
import { presence } from "../presence";
import type { Item, QueueStatus, Schemas } from "../types";

type CustomerConversation = Schemas["CustomerConversation"];

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

export function conversationExtras(me: string): ConversationExtras {
  let conversationId: string | null = null;
  let disposed = false;
  const viewing = h("p", { class: "presence", id: "presence", role: "status", "aria-live": "polite" });
  const summary = h("summary", { text: "Customer history" });
  const list = h("ul", { class: "context-list", id: "customer-context", "aria-label": "The customer's conversations" });
  const context = h("details", { class: "context" }, summary, list);
  const el = h("div", { class: "extras" }, viewing, context);

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

  async function loadContext(item: Item): Promise<void> {
    mount(list, h("li", { class: "muted", text: "Loading…" }));
    try {
      const page = await customers.conversations(item.customer.id, { limit: 20 });
      if (disposed) return;
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
