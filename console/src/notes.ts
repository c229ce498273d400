// Internal notes of the conversations on screen: loaded with the conversation, kept current
// by `note_added` (the store routes it here), and merged into the timeline by time. Notes
// are the team's only: the server keeps them apart from messages, so nothing here can be
// sent to the customer.

import * as endpoints from "./endpoints";
import type { Message, Schemas } from "./types";

export type Note = Schemas["NoteView"];

/** One line of a conversation's timeline. */
export type TimelineEntry = { kind: "message"; message: Message } | { kind: "note"; note: Note };

export class ConversationNotes {
  private open = new Map<string, Map<string, Note>>();

  constructor(private readonly fetch: (conversationId: string) => Promise<{ items: Note[] }> = endpoints.notes.list) {}

  /** Starts keeping `conversationId`'s notes (events for it are taken from now on). */
  track(conversationId: string): void {
    if (!this.open.has(conversationId)) this.open.set(conversationId, new Map());
  }

  untrack(conversationId: string): void {
    this.open.delete(conversationId);
  }

  /** Fetches the conversation's notes (those an event brought first are kept). */
  async load(conversationId: string): Promise<void> {
    const page = await this.fetch(conversationId);
    const notes = this.open.get(conversationId);
    if (!notes) return;
    for (const n of page.items) notes.set(n.id, n);
  }

  /** A note from an event or an answer; whether a tracked conversation got a new one. */
  add(note: Note): boolean {
    const notes = this.open.get(note.conversation_id);
    if (!notes || notes.has(note.id)) return false;
    notes.set(note.id, note);
    return true;
  }

  /** The conversation's notes loaded so far, oldest first. */
  list(conversationId: string): Note[] {
    return [...(this.open.get(conversationId)?.values() ?? [])].sort(byTime);
  }
}

function byTime(a: { created_at: string; id: string }, b: { created_at: string; id: string }): number {
  return Date.parse(a.created_at) - Date.parse(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Messages and notes in one list, oldest first. */
export function timeline(messages: readonly Message[], notes: readonly Note[]): TimelineEntry[] {
  const entries: TimelineEntry[] = [
    ...messages.map((message) => ({ kind: "message" as const, message })),
    ...notes.map((note) => ({ kind: "note" as const, note })),
  ];
  const of = (e: TimelineEntry) => (e.kind === "message" ? e.message : e.note);
  return entries.sort((a, b) => byTime(of(a), of(b)));
}
