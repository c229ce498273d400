// Internal notes in the conversation view: each note in the timeline, styled apart and
// labelled "Internal note"; the form that adds one; and a polite live region that reads out
// a note another expert adds while the conversation is open. Notes are never sent to the
// customer (the server keeps them out of messages); the form says so.

import "./team.css";
import { ApiError, uuid } from "../api";
import { h } from "../dom";
import { notes as notesApi } from "../endpoints";
import { clock } from "../format";
import type { Note } from "../notes";
import type { Store } from "../store";

/** A note as a line of the timeline. */
export function noteView(n: Note, me: string): HTMLElement {
  const who = n.author_user_id === me ? "You" : (n.author_email ?? "An expert");
  return h(
    "li",
    { class: "msg note", "data-note": n.id },
    h(
      "div",
      { class: "msg-meta" },
      h("span", { class: "note-label", text: "Internal note" }),
      h("span", { class: "who", text: who }),
      h("time", { datetime: n.created_at, text: clock(n.created_at) }),
    ),
    h("p", { class: "msg-body", text: n.body }),
  );
}

export interface NotesPanel {
  el: HTMLElement;
  /** The notes the conversation had when it was loaded: not read out. */
  baseline(notes: readonly Note[]): void;
  /** The notes now shown: reads out those another expert added since the last call. */
  shown(notes: readonly Note[]): void;
}

/** The "add a note" form of the conversation `conversationId()`; `added` redraws the timeline. */
export function notesPanel(store: Store, conversationId: () => string | null, added: () => void): NotesPanel {
  const me = store.me;
  let announcedUpTo: Set<string> | null = null;
  let attempt = uuid();
  const live = h("p", { class: "visually-hidden", role: "status", "aria-live": "polite", id: "note-live" });
  const error = h("p", { class: "form-error", role: "alert", id: "note-error" });
  const input = h("textarea", {
    id: "note-body",
    rows: 2,
    maxlength: "4000",
    "aria-describedby": "note-help",
    on: {
      input: () => {
        attempt = uuid(); // another text is another note
        error.textContent = "";
      },
      keydown: (e) => {
        const k = e as KeyboardEvent;
        if (k.key === "Enter" && (k.ctrlKey || k.metaKey)) {
          // The note's own shortcut, not the reply's.
          e.preventDefault();
          e.stopPropagation();
          void submit();
        } else if (k.key === "Escape") {
          e.preventDefault();
          input.blur();
        }
      },
    },
  });
  const button = h("button", { type: "submit", id: "note-add", text: "Add note" });

  async function submit(): Promise<void> {
    const id = conversationId();
    const body = input.value.trim();
    if (!id) return;
    if (!body) {
      error.textContent = "Write the note first.";
      return;
    }
    button.disabled = true;
    try {
      const note = await notesApi.add(id, { body }, attempt);
      input.value = "";
      attempt = uuid();
      live.textContent = "Internal note added. Only your team sees it.";
      // Its own event may have brought it already.
      store.notes.add(note);
      added();
    } catch (e) {
      error.textContent =
        e instanceof ApiError ? `Could not add the note: ${e.message}.` : "Could not add the note: the server did not answer. Try again.";
    } finally {
      button.disabled = false;
    }
  }

  const el = h(
    "form",
    {
      class: "note-form",
      "aria-label": "Internal note",
      on: {
        submit: (e) => {
          e.preventDefault();
          void submit();
        },
      },
    },
    h("label", { for: "note-body", text: "Internal note" }),
    h("span", { class: "note-help", id: "note-help", text: "Only your team sees notes; they are never sent to the customer. Ctrl+Enter adds it." }),
    input,
    h("div", { class: "note-actions" }, button),
    error,
    live,
  );

  return {
    el,
    baseline(notes) {
      announcedUpTo = new Set(notes.map((n) => n.id));
    },
    shown(notes) {
      if (!announcedUpTo) return;
      const known = announcedUpTo;
      const last = notes.filter((n) => !known.has(n.id) && n.author_user_id !== me).at(-1);
      if (last) live.textContent = `New internal note from ${last.author_email ?? "an expert"}: ${last.body}`;
      announcedUpTo = new Set(notes.map((n) => n.id));
    },
  };
}
