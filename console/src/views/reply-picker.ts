// The saved-reply picker of the reply box: type `/` and a few letters, choose with the arrow
// keys, Enter inserts the reply with its placeholders filled in, Escape closes. Keyboard
// only, and the text box keeps the focus throughout: the list is a listbox the box points
// into with `aria-activedescendant`, and a polite status line says how many replies match
// and what was inserted. The inserted text is ordinary composer text: the expert reads it,
// may edit it, and sends it with the usual action.

import "./team.css";
import { h, mount } from "../dom";
import { savedReplies } from "../endpoints";
import { type ReplyContext, type SavedReply, type SlashQuery, filterReplies, insertAt, renderReply, slashQuery } from "../saved-replies";

export interface ReplyPicker {
  /** The list, the hint and the status line; goes right after the text box. */
  el: HTMLElement;
  dispose(): void;
}

const MAX_SHOWN = 8;

export function replyPicker(input: HTMLTextAreaElement, orgId: string, context: () => ReplyContext | null): ReplyPicker {
  let replies: SavedReply[] | null = null;
  let loading: Promise<void> | null = null;
  let at: SlashQuery | null = null;
  let shown: SavedReply[] = [];
  let active = 0;
  let inserting = false;

  const listId = "saved-reply-list";
  const list = h("ul", { id: listId, class: "picker-list", role: "listbox", "aria-label": "Saved replies", hidden: true });
  const hint = h("p", { class: "picker-hint", id: "saved-reply-hint", hidden: true });
  const status = h("p", { class: "visually-hidden", role: "status", "aria-live": "polite", id: "saved-reply-status" });
  const help = h("span", { class: "visually-hidden", id: "saved-reply-help", text: "Type / and a few letters to insert a saved reply." });
  const el = h("div", { class: "picker" }, list, hint, status, help);

  const described = input.getAttribute("aria-describedby");
  input.setAttribute("aria-describedby", `${described ? `${described} ` : ""}saved-reply-help`);
  input.setAttribute("aria-controls", listId);
  input.setAttribute("aria-autocomplete", "list");

  function close(): void {
    at = null;
    shown = [];
    list.hidden = true;
    hint.hidden = true;
    input.removeAttribute("aria-activedescendant");
  }

  function ensureLoaded(): Promise<void> {
    loading ??= savedReplies
      .list(orgId)
      .then((page) => {
        replies = page.items;
      })
      .catch((e: unknown) => {
        replies = [];
        loading = null; // try again at the next `/`
        status.textContent = `Could not load the saved replies: ${(e as Error).message}`;
      });
    return loading;
  }

  function preview(r: SavedReply): string {
    const ctx = context();
    const text = ctx ? renderReply(r.body, ctx) : r.body;
    return text.length > 90 ? `${text.slice(0, 89)}…` : text;
  }

  function draw(): void {
    if (!at) return;
    const query = at.query;
    if (replies === null) {
      mount(hint, "Loading saved replies…");
      hint.hidden = false;
      list.hidden = true;
      return;
    }
    shown = filterReplies(replies, query).slice(0, MAX_SHOWN);
    active = Math.min(active, Math.max(shown.length - 1, 0));
    if (shown.length === 0) {
      list.hidden = true;
      input.removeAttribute("aria-activedescendant");
      const text = replies.length === 0 ? "This org has no saved replies yet." : `No saved reply matches “${query}”.`;
      mount(hint, text, " Esc to close.");
      hint.hidden = false;
      status.textContent = text;
      return;
    }
    mount(
      list,
      shown.map((r, i) =>
        h(
          "li",
          {
            id: `saved-reply-${i}`,
            role: "option",
            class: "picker-option",
            "aria-selected": String(i === active),
            "data-reply": r.name,
            on: {
              // Keep the focus in the text box: a click chooses, it does not move focus.
              mousedown: (e) => e.preventDefault(),
              click: () => insert(r),
            },
          },
          h("span", { class: "picker-name", text: r.name }),
          h("span", { class: "picker-preview", text: preview(r) }),
        ),
      ),
    );
    list.hidden = false;
    mount(hint, h("kbd", { text: "↑" }), " ", h("kbd", { text: "↓" }), " choose · ", h("kbd", { text: "Enter" }), " insert · ", h("kbd", { text: "Esc" }), " close");
    hint.hidden = false;
    input.setAttribute("aria-activedescendant", `saved-reply-${active}`);
    status.textContent = `${shown.length} saved repl${shown.length === 1 ? "y" : "ies"}: ${shown[active].name}.`;
  }

  function update(): void {
    if (inserting) return;
    const found = input.selectionStart === input.selectionEnd ? slashQuery(input.value, input.selectionStart ?? 0) : null;
    if (!found) {
      if (at) close();
      return;
    }
    if (!at || at.start !== found.start) active = 0;
    at = found;
    if (replies === null) void ensureLoaded().then(() => at && draw());
    draw();
  }

  function move(by: number): void {
    if (shown.length === 0) return;
    active = (active + by + shown.length) % shown.length;
    for (const [i, li] of [...list.children].entries()) li.setAttribute("aria-selected", String(i === active));
    input.setAttribute("aria-activedescendant", `saved-reply-${active}`);
    list.children[active]?.scrollIntoView({ block: "nearest" });
    status.textContent = `${shown[active].name} (${active + 1} of ${shown.length}).`;
  }

  function insert(r: SavedReply): void {
    if (!at) return;
    const ctx = context();
    const text = ctx ? renderReply(r.body, ctx) : r.body;
    const next = insertAt(input.value, at, text);
    close();
    input.value = next.text;
    input.setSelectionRange(next.caret, next.caret);
    // The composer counts it as the expert's own edit (and enables sending).
    inserting = true;
    input.dispatchEvent(new Event("input", { bubbles: true }));
    inserting = false;
    input.focus();
    status.textContent = `Inserted the saved reply “${r.name}”. Review it before sending.`;
  }

  function onKey(e: KeyboardEvent): void {
    if (!at || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      if (shown.length === 0) return;
      move(e.key === "ArrowDown" ? 1 : -1);
    } else if (e.key === "Enter" && !e.shiftKey) {
      if (shown.length === 0) return;
      insert(shown[active]);
    } else if (e.key === "Escape") {
      close();
      status.textContent = "Saved replies closed.";
    } else {
      return;
    }
    // Before the composer's own keys (Escape leaves the box there) and the console's.
    e.preventDefault();
    e.stopImmediatePropagation();
  }

  const onInput = () => update();
  const onSelect = () => update();
  const onBlur = () => close();
  const onKeyUp = (e: KeyboardEvent) => {
    if (["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) update();
  };
  input.addEventListener("keydown", onKey, true);
  input.addEventListener("keyup", onKeyUp);
  input.addEventListener("input", onInput);
  input.addEventListener("click", onSelect);
  input.addEventListener("blur", onBlur);

  return {
    el,
    dispose: () => {
      input.removeEventListener("keydown", onKey, true);
      input.removeEventListener("keyup", onKeyUp);
      input.removeEventListener("input", onInput);
      input.removeEventListener("click", onSelect);
      input.removeEventListener("blur", onBlur);
    },
  };
}
