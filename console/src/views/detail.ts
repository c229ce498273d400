// One queue item with its conversation: the history (older pages on scroll), the agent's
// draft in an editable composer, and the expert's actions. Every action carries an
// Idempotency-Key (see api.ts `act`), and its button is disabled while it runs, so a double
// click sends once. A 409 says who holds the item or what state it is in now, and the item
// is refreshed. The item and its messages live in the store, which applies the events.

import { ApiError } from "../api";
import { h, mount } from "../dom";
import { type ActionBodies, type ActionName, journey, queue } from "../endpoints";
import { CHANNEL_LABEL, DELIVERY_LABEL, STATUS_LABEL, ago, clock, duration, localInput, percent, sendsIn, shortId } from "../format";
import { wordDiff } from "../diff";
import { type JourneyStep, stepClock, stepLabel } from "../journey";
import { timeline } from "../notes";
import { session } from "../session";
import type { Store } from "../store";
import type { CurrentState, Item, Message } from "../types";
import { noteView, notesPanel } from "./notes";
import { replyPicker } from "./reply-picker";
import { conversationExtras } from "./context";

export type { ActionName } from "../endpoints";

const VERB: Record<ActionName, string> = {
  claim: "claim",
  unclaim: "unclaim",
  release: "release",
  respond: "send a reply to",
  snooze: "snooze",
  resolve: "resolve",
  reopen: "reopen",
  stop: "stop the autopilot on",
};


export interface DetailPane {
  el: HTMLElement;
  itemId: string;
  run(action: ActionName): void;
  focusComposer(): void;
  focusSnooze(): void;
  focus(): void;
  dispose(): void;
}

/**
 * What changed on an item since the expert looked at `seen` (a 412, or a 409 that carries
 * the whole item): the new customer message, the new draft, the state or the holder.
 */
export function explainChange(action: ActionName, seen: Item, now: Item, me: string): string {
  const changes: string[] = [];
  if (now.last_message && now.last_message.at !== seen.last_message?.at) {
    changes.push(`the customer wrote again ("${now.last_message.preview}")`);
  }
  if ((now.draft?.id ?? null) !== (seen.draft?.id ?? null) || (now.draft?.text ?? null) !== (seen.draft?.text ?? null)) {
    changes.push(now.draft ? "the agent wrote a new draft" : "the draft was sent or withdrawn");
  }
  if (now.status !== seen.status) changes.push(`it is ${STATUS_LABEL[now.status].toLowerCase()} now`);
  if (now.claimed_by !== seen.claimed_by) {
    changes.push(now.claimed_by ? (now.claimed_by === me ? "you hold it now" : `user ${shortId(now.claimed_by)} holds it now`) : "nobody holds it now");
  }
  const what = changes.length ? changes.join("; ") : "it changed";
  return `Nothing was sent: ${what}. Review it again, then ${VERB[action]}.`;
}

/** Why an action was refused, in words, from the 409's `current` state. */
export function explainConflict(action: ActionName, current: CurrentState | null, me: string, message: string): string {
  if (!current) return `Could not ${VERB[action]} this item: ${message}.`;
  if (current.status === "claimed" && current.claimed_by && current.claimed_by !== me) {
    return `Could not ${VERB[action]} this item: it is claimed by another expert (user ${shortId(current.claimed_by)}). The item has been refreshed.`;
  }
  const holder = current.status === "claimed" && current.claimed_by === me ? " by you" : "";
  return `Could not ${VERB[action]} this item: it is ${STATUS_LABEL[current.status].toLowerCase()}${holder} now (version ${current.version}). The item has been refreshed.`;
}

/**
 * Whether `fresh` is a later state of the item than `shown`: a higher version (versions only
 * grow), or the same version read again (the full row after an event's patch). An older
 * version, from a page or a fetch that started before a change, never replaces the one shown:
 * the next action would carry its stale version (If-Match) and be refused.
 */
export function laterState(fresh: Item, shown: Item | undefined): boolean {
  if (!shown) return true;
  return fresh.version > shown.version || (fresh.version === shown.version && fresh.updated_at !== shown.updated_at);
}

export function detailPane(store: Store, itemId: string, opts: { isAdmin: boolean; back(): void }): DetailPane {
  const me = store.me;
  let item: Item | undefined = store.get(itemId);
  /** The conversation whose messages this pane keeps open in the store. */
  let conversationId: string | null = null;
  /** The store's revision of the messages last drawn. */
  let drawn = -1;
  let loadingOlder = false;
  let busy: ActionName | null = null;
  let mode: "draft" | "own" = "draft";
  let dirty = false;
  let lastDraft: string | null = null;
  let disposed = false;
  /** The countdown shown while the item is on the autopilot's hold (updated every second). */
  let countdown: HTMLElement | null = null;
  /** The journeys opened under messages, kept across redraws of the list. */
  const journeys = new Map<string, { open: boolean; steps?: JourneyStep[]; error?: string }>();

  const header = h("header", { class: "detail-header" });
  const banner = h("div", { class: "banner", role: "alert", id: "detail-banner", hidden: true });
  const olderButton = h("button", {
    type: "button",
    class: "link older",
    text: "Load older messages",
    on: { click: () => void loadOlder() },
  });
  const messageList = h("ol", { class: "messages", "aria-label": "Messages and internal notes, oldest first" });
  const history = h(
    "div",
    { class: "history", tabIndex: 0, role: "region", "aria-label": "Conversation history" },
    olderButton,
    messageList,
  );
  const draftInfo = h("div", { class: "draft-info", id: "draft-info" });
  const composer = h("textarea", {
    id: "composer",
    rows: 5,
    "aria-describedby": "draft-info",
    on: {
      input: () => {
        dirty = true;
        renderActions();
      },
      keydown: (e) => {
        const k = e as KeyboardEvent;
        if (k.key === "Enter" && (k.ctrlKey || k.metaKey)) {
          e.preventDefault();
          run(mode === "own" ? "respond" : "release");
        } else if (k.key === "Escape") {
          e.preventDefault();
          composer.blur();
        }
      },
    },
  });
  const composerLabel = h("label", { for: "composer", id: "composer-label" });
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Actions" });
  const snoozeInput = h("input", { type: "datetime-local", id: "snooze-until" });
  const snoozeRow = h(
    "div",
    { class: "snooze" },
    h("label", { for: "snooze-until", text: "Snooze until" }),
    snoozeInput,
  );
  // `/` in the reply box: saved replies, filled for this customer and this expert.
  const picker = replyPicker(composer, store.orgId, () => {
    const user = session()?.user;
    return item && user ? { customer: item.customer, expert: user } : null;
  });
  const notePanel = notesPanel(store, () => conversationId, () => renderMessages());
  const composeBox = h("div", { class: "compose" }, composerLabel, draftInfo, composer, picker.el, actions, snoozeRow, notePanel.el);
  // Who else is viewing, and the customer's other conversations (views/context.ts).
  const extras = conversationExtras(me, {
    isAdmin: opts.isAdmin,
    erased: () => {
      // Nothing of the conversation is left to show or answer.
      history.hidden = true;
      composeBox.hidden = true;
      say("This customer was erased: the conversation is gone from every console.", "info");
    },
  });
  const el = h(
    "section",
    { class: "detail", tabIndex: -1, "aria-label": "Conversation", "data-item": itemId },
    header,
    extras.el,
    banner,
    history,
    composeBox,
  );

  const observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) void loadOlder();
  });
  observer.observe(olderButton);

  const unsubscribe = store.subscribe(() => {
    // While one of this pane's actions runs, its answer brings the item, and the pane draws
    // the store's state again once it is back. The action's own event often arrives first:
    // drawn then, it showed the new state while the pane still refused every action (busy),
    // so the shortcut an expert pressed on it (`x` right after a reopen showed "Pending")
    // was silently lost.
    if (!busy && adoptStored()) render();
    if (conversationId && store.conversation(conversationId)?.revision !== drawn) renderMessages();
  });

  /** Takes the store's item when it is a later state than the one shown; whether it did. */
  function adoptStored(): boolean {
    const fresh = store.get(itemId);
    if (!fresh || !laterState(fresh, item)) return false;
    item = fresh;
    return true;
  }

  function fact(term: string, value: Node | string): HTMLElement {
    return h("div", { class: "fact" }, h("dt", { text: term }), h("dd", {}, value));
  }

  function say(text: string | null, kind: "error" | "info" = "error"): void {
    banner.hidden = !text;
    banner.className = `banner banner-${kind}`;
    banner.textContent = text ?? "";
  }

  function renderHeader(): void {
    if (!item) {
      mount(header, h("h2", { text: "Loading…" }));
      return;
    }
    const name = item.customer.display_name || item.customer.external_id;
    const holder = item.claimed_by ? (item.claimed_by === me ? "you" : `another expert (user ${shortId(item.claimed_by)})`) : null;
    const sla = item.sla_due_at ? Date.parse(item.sla_due_at) - Date.now() : null;
    mount(
      header,
      h(
        "div",
        { class: "detail-title" },
        h("button", { type: "button", class: "link back", text: "← Queue", "aria-keyshortcuts": "Escape", on: { click: opts.back } }),
        h("h2", { id: "detail-title" }, h("span", { class: `chan chan-${item.channel}`, text: CHANNEL_LABEL[item.channel] }), " ", name),
      ),
      h(
        "dl",
        { class: "facts" },
        fact("Status", h("span", { class: `chip chip-${item.status}`, id: "detail-status", text: STATUS_LABEL[item.status] })),
        item.flagged ? fact("Review", h("span", { class: "flag", id: "detail-flag", text: "⚑ flagged: the agent did not answer" })) : null,
        fact("Customer", item.customer.external_id),
        fact("Waiting", ago(item.created_at)),
        holder ? fact("Held by", h("span", { id: "detail-holder", text: holder })) : null,
        sla !== null
          ? fact("SLA", h("span", { class: sla < 0 ? "overdue" : "", text: sla < 0 ? `overdue by ${duration(-sla)}` : `due in ${duration(sla)}` }))
          : null,
        item.snoozed_until ? fact("Snoozed until", clock(item.snoozed_until)) : null,
        item.status === "auto_pending" && item.send_at
          ? fact(
              "Autopilot",
              h(
                "span",
                { id: "autopilot-hold" },
                (countdown = h("span", { id: "autopilot-countdown", role: "timer", "aria-live": "off", text: sendsIn(item.send_at) })),
                item.autopilot_rule ? ` · admitted by the rule “${item.autopilot_rule}”` : null,
              ),
            )
          : null,
      ),
    );
    if (item.status !== "auto_pending") countdown = null;
  }

  function renderComposer(): void {
    if (!item) return;
    const draft = item.draft;
    const name = item.customer.display_name || item.customer.external_id;
    composerLabel.textContent = mode === "own" ? `Your reply to ${name}` : `Reply to ${name} (agent draft, editable)`;
    if (item.status !== "pending" && item.status !== "claimed" && item.status !== "auto_pending") {
      // Nothing to answer now: the last reply went out, or the item is parked or closed.
      composerLabel.textContent = `Reply to ${name}`;
      mount(draftInfo, h("span", { text: `No reply is due: the item is ${STATUS_LABEL[item.status].toLowerCase()}. Reopen it to answer again.` }));
      composer.value = "";
      dirty = false;
      lastDraft = null;
      mode = "draft";
      return;
    }
    if (mode === "draft") {
      if (draft && draft.fallback) {
        mount(
          draftInfo,
          h("strong", { class: "fallback", id: "draft-fallback", text: "Fallback draft" }),
          " — the agent did not answer, so this is the stored fallback text. Check it before sending.",
        );
      } else if (draft) {
        mount(draftInfo, h("span", { text: `Agent draft · confidence ${percent(draft.confidence)}` }));
      } else {
        mount(draftInfo, h("span", { text: "No draft for this item yet: write the reply yourself." }));
      }
      // A new draft replaces the text unless the expert has started editing.
      const text = draft?.text ?? "";
      if (!dirty && text !== lastDraft) composer.value = text;
      lastDraft = text;
    } else {
      mount(draftInfo, h("span", { text: "Written by you; the agent's draft is not used." }));
    }
  }

  function button(action: ActionName, label: string, keys: string, enabled: boolean, primary = false): HTMLButtonElement {
    return h("button", {
      type: "button",
      class: primary ? "primary" : "",
      "data-action": action,
      "aria-keyshortcuts": keys,
      disabled: !enabled || busy !== null,
      text: busy === action ? `${label}…` : label,
      on: { click: () => run(action) },
    });
  }

  function renderActions(): void {
    if (!item) {
      actions.replaceChildren();
      return;
    }
    const s = item.status;
    const held = s === "auto_pending";
    const open = s === "pending" || s === "claimed" || held;
    const mine = item.claimed_by === me;
    const text = composer.value.trim();
    const edited = mode === "draft" && !!item.draft && composer.value !== item.draft.text;
    const sendLabel = mode === "own" ? "Send reply" : edited && open ? "Release edited" : "Release";
    mount(
      actions,
      held ? button("stop", "Stop autopilot", "T", true, true) : null,
      s === "claimed" && mine ? button("unclaim", "Unclaim", "U", true) : button("claim", "Claim", "C", s === "pending" || held || (s === "claimed" && !mine)),
      mode === "own"
        ? button("respond", sendLabel, "Control+Enter", open && text.length > 0, true)
        : button("release", sendLabel, "Control+Enter", open && text.length > 0, !held),
      h("button", {
        type: "button",
        class: "link",
        "data-action": "mode",
        disabled: !open,
        text: mode === "own" ? "Use the agent's draft" : "Write my own reply",
        on: {
          click: () => {
            mode = mode === "own" ? "draft" : "own";
            dirty = mode === "own";
            composer.value = mode === "own" ? "" : (item?.draft?.text ?? "");
            lastDraft = item?.draft?.text ?? null;
            render();
            composer.focus();
          },
        },
      }),
      h("span", { class: "spacer" }),
      button("snooze", "Snooze", "S", open || s === "awaiting_client"),
      button("resolve", "Resolve", "X", s !== "resolved"),
      button("reopen", "Reopen", "O", s === "awaiting_client" || s === "snoozed" || s === "resolved"),
    );
    composer.disabled = !open || busy !== null;
  }

  /** The "Journey" button under a message and the timeline it opens (loaded once). */
  function journeyView(m: Message): HTMLElement[] {
    const id = `journey-${m.id}`;
    const list = h("ol", { class: "journey", id, "aria-label": "Journey of this message", hidden: true });
    const toggle = h("button", {
      type: "button",
      class: "link journey-toggle",
      text: "Journey",
      "aria-expanded": "false",
      "aria-controls": id,
      on: { click: () => void flip() },
    });
    const fill = (state: { steps?: JourneyStep[]; error?: string }): void => {
      if (state.error) mount(list, [h("li", { class: "journey-error", text: state.error })]);
      else if (!state.steps) mount(list, [h("li", { text: "Loading…" })]);
      else if (state.steps.length === 0) mount(list, [h("li", { text: "No steps recorded for this message." })]);
      else
        mount(
          list,
          state.steps.map((s) =>
            h(
              "li",
              { "data-step": s.step },
              h("time", { datetime: s.at, text: stepClock(s.at) }),
              ` ${stepLabel(s)}`,
              h("span", { class: "journey-pod", text: ` · ${s.pod}` }),
            ),
          ),
        );
    };
    const show = (open: boolean): void => {
      toggle.setAttribute("aria-expanded", String(open));
      list.hidden = !open;
    };
    async function flip(): Promise<void> {
      const state = journeys.get(m.id) ?? { open: false };
      state.open = !state.open;
      journeys.set(m.id, state);
      show(state.open);
      if (!state.open || state.steps || !conversationId) return;
      fill(state);
      try {
        state.steps = (await journey.get(conversationId, m.id)).steps;
        state.error = undefined;
      } catch (e) {
        state.error = `Could not load the journey: ${(e as Error).message}`;
      }
      fill(state);
    }
    const state = journeys.get(m.id);
    if (state?.open) {
      show(true);
      fill(state);
    }
    return [toggle, list];
  }

  function messageView(m: Message): HTMLElement {
    const outbound = m.direction !== "inbound";
    const meta = conversationId ? store.conversation(conversationId)?.meta : null;
    const who =
      m.author === "customer"
        ? (meta?.customer.display_name ?? item?.customer.display_name ?? "Customer")
        : m.author === "agent"
          ? m.author_user_id
            ? "Agent draft, released"
            : "Agent draft, sent by the autopilot"
          : m.author_user_id === me
            ? "You"
            : "Expert";
    const status = m.delivery?.status;
    return h(
      "li",
      { class: `msg ${outbound ? "out" : "in"}`, "data-message": m.id, "data-delivery": status ?? "" },
      h("div", { class: "msg-meta" }, h("span", { class: "who", text: who }), h("time", { datetime: m.created_at, text: clock(m.created_at) })),
      h("p", { class: "msg-body", text: m.body }),
      m.draft
        ? h(
            "details",
            { class: "draft-diff" },
            h("summary", { text: "Changed from the agent's draft" }),
            h(
              "p",
              { class: "diff" },
              wordDiff(m.draft, m.body).map((p) =>
                p.kind === "same"
                  ? p.text
                  : h(
                      p.kind === "removed" ? "del" : "ins",
                      {},
                      // <del> and <ins> are not announced by every screen reader.
                      h("span", { class: "visually-hidden", text: p.kind === "removed" ? "[removed: " : "[added: " }),
                      p.text,
                      h("span", { class: "visually-hidden", text: "]" }),
                    ),
              ),
            ),
          )
        : null,
      status
        ? h(
            "p",
            { class: `delivery delivery-${status}`, title: m.delivery?.error ?? "" },
            h("span", { class: "visually-hidden", text: "Delivery: " }),
            DELIVERY_LABEL[status] ?? status,
            m.delivery?.error ? `: ${m.delivery.error}` : "",
          )
        : null,
      ...journeyView(m),
    );
  }

  function renderMessages(): void {
    if (disposed || !conversationId) return;
    const nearBottom = history.scrollHeight - history.scrollTop - history.clientHeight < 80;
    const c = store.conversation(conversationId);
    drawn = c?.revision ?? -1;
    const notes = store.notes.list(conversationId);
    const entries = timeline(store.messages(conversationId), notes);
    mount(messageList, entries.map((e) => (e.kind === "note" ? noteView(e.note, me) : messageView(e.message))));
    notePanel.shown(notes);
    olderButton.hidden = !c?.nextBefore;
    if (nearBottom) history.scrollTop = history.scrollHeight;
  }

  function render(): void {
    if (disposed) return;
    renderHeader();
    renderComposer();
    renderActions();
  }

  async function loadConversation(): Promise<void> {
    if (!item) {
      try {
        item = await store.fetchItem(itemId);
      } catch (e) {
        say(`Could not load this item: ${(e as Error).message}`);
        return;
      }
    }
    if (disposed) return;
    render();
    conversationId = item.conversation_id;
    store.openConversation(conversationId);
    extras.show(item);
    store.notes.track(conversationId);
    const notesFor = conversationId;
    store.notes.load(notesFor).then(
      () => {
        if (disposed) return;
        notePanel.baseline(store.notes.list(notesFor));
        renderMessages();
      },
      (e: unknown) => say(`Could not load the internal notes: ${(e as Error).message}`),
    );
    try {
      await store.loadConversation(conversationId);
      if (disposed) return;
      renderMessages();
      history.scrollTop = history.scrollHeight;
    } catch (e) {
      say(`Could not load the conversation: ${(e as Error).message}`);
    }
  }

  async function loadOlder(): Promise<void> {
    if (!conversationId || loadingOlder) return;
    loadingOlder = true;
    try {
      if (!(await store.loadOlder(conversationId)) || disposed) return;
      // The store has them; the screen does not yet.
      const before = history.scrollHeight;
      renderMessages();
      // Keep what the expert was reading where it was.
      history.scrollTop += history.scrollHeight - before;
    } catch (e) {
      say(`Could not load older messages: ${(e as Error).message}`);
    } finally {
      loadingOlder = false;
    }
  }

  function run(action: ActionName): void {
    if (!item || busy) return;
    const current = item;
    let body: ActionBodies[ActionName] = undefined;
    if (action === "release") {
      const text = composer.value;
      if (!text.trim()) {
        say(current.draft ? "The reply is empty: write one, or use the agent's draft." : "There is no draft: write a reply first.");
        return;
      }
      // Always the text on screen: what the expert saw is what is sent, never "whatever
      // draft the server holds now" (an unedited draft is recorded as the agent's).
      body = { body: text };
    } else if (action === "respond") {
      if (!composer.value.trim()) {
        say("Write a reply first.");
        return;
      }
      body = { body: composer.value };
    } else if (action === "snooze") {
      if (!snoozeInput.value) {
        const later = new Date(Date.now() + 60 * 60 * 1000);
        snoozeInput.value = localInput(later);
        snoozeInput.focus();
        say("Choose until when, then press Snooze again (one hour from now is filled in).", "info");
        return;
      }
      const until = new Date(snoozeInput.value);
      if (!(until.getTime() > Date.now())) {
        say("Choose a time in the future.");
        snoozeInput.focus();
        return;
      }
      body = { until: until.toISOString() };
    }
    busy = action;
    say(null);
    renderActions();
    void (async () => {
      try {
        const answer = await queue.act(current.id, action, current.version, body);
        item = answer.item;
        store.upsert(answer.item);
        if (answer.message && conversationId) {
          store.putOutbound(conversationId, answer.message, me);
          renderMessages();
          history.scrollTop = history.scrollHeight;
        }
        if (action === "release" || action === "respond") {
          mode = "draft";
          dirty = false;
          composer.value = "";
          lastDraft = null;
        }
        if (action === "snooze") snoozeInput.value = "";
        say(done(action, answer.item), "info");
      } catch (e) {
        const whole = e instanceof ApiError ? (e.current as unknown as Item | null) : null;
        if (e instanceof ApiError && (e.status === 412 || e.code === "no_draft" || e.code === "stale_draft") && whole && "id" in whole) {
          // The item as it is now came with the refusal: show it, with what changed.
          say(explainChange(action, current, whole, me));
          item = whole;
          store.upsert(whole);
        } else if (e instanceof ApiError && e.status === 409) {
          say(explainConflict(action, e.current, me, e.message));
          try {
            const fresh = await queue.get(current.id);
            item = fresh;
            store.upsert(fresh);
          } catch {
            store.refetch(current.id);
          }
        } else if (e instanceof ApiError && e.status === 403) {
          say(`You may not ${VERB[action]} this item (${e.message}).`);
        } else if (e instanceof ApiError) {
          say(`Could not ${VERB[action]} this item: ${e.message}.`);
        } else {
          say(`Could not ${VERB[action]} this item: the server did not answer. Nothing was sent twice; try again.`);
        }
      } finally {
        busy = null;
        // What the store learned meanwhile (another expert's change after this one).
        adoptStored();
        render();
        // Keep the shortcuts working: focus left in a field that is now disabled or done
        // with goes to the conversation.
        const focused = document.activeElement;
        if (focused === snoozeInput || focused === document.body || (focused === composer && composer.disabled)) {
          el.focus({ preventScroll: true });
        }
      }
    })();
  }

  function done(action: ActionName, fresh: Item): string {
    switch (action) {
      case "claim":
        return "Claimed: the item is yours.";
      case "release":
      case "respond":
        return "Reply queued for delivery.";
      case "snooze":
        return `Snoozed until ${clock(fresh.snoozed_until)}.`;
      case "stop":
        return "Autopilot stopped: the draft waits for an expert.";
      default:
        return `${STATUS_LABEL[fresh.status]}.`;
    }
  }

  render();
  void loadConversation();
  // Waiting times and the SLA move on by themselves.
  const tick = window.setInterval(renderHeader, 30_000);
  const secondTick = window.setInterval(() => {
    if (countdown && item?.status === "auto_pending" && item.send_at) countdown.textContent = sendsIn(item.send_at);
  }, 1000);

  return {
    el,
    itemId,
    run,
    focusComposer: () => composer.focus(),
    focusSnooze: () => snoozeInput.focus(),
    focus: () => el.focus({ preventScroll: true }),
    dispose: () => {
      disposed = true;
      window.clearInterval(tick);
      window.clearInterval(secondTick);
      observer.disconnect();
      unsubscribe();
      extras.dispose();
      picker.dispose();
      if (conversationId) store.notes.untrack(conversationId);
      if (conversationId) store.closeConversation(conversationId);
    },
  };
}
