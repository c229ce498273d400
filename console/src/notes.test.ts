import { describe, expect, it } from "vitest";
import { ConversationNotes, type Note, timeline } from "./notes";
import { Store, type StoreDeps } from "./store";
import type { Message, RealtimeEvent } from "./types";

function note(id: string, at: string, conversation = "c1"): Note {
  return { id, conversation_id: conversation, body: `note ${id}`, created_at: at, author_user_id: "u", author_email: "a@b" };
}

function message(id: string, at: string): Message {
  return { id, direction: "inbound", author: "customer", body: `msg ${id}`, created_at: at } as Message;
}

describe("ConversationNotes", () => {
  it("keeps notes of tracked conversations only, once each, oldest first", async () => {
    const notes = new ConversationNotes(async () => ({ items: [note("n1", "2026-01-01T10:00:00.5Z")] }));
    expect(notes.add(note("x", "2026-01-01T10:00:00Z"))).toBe(false);
    notes.track("c1");
    expect(notes.add(note("n2", "2026-01-01T10:00:01Z"))).toBe(true);
    expect(notes.add(note("n2", "2026-01-01T10:00:01Z"))).toBe(false);
    expect(notes.add(note("o", "2026-01-01T10:00:01Z", "c2"))).toBe(false);
    await notes.load("c1");
    expect(notes.list("c1").map((n) => n.id)).toEqual(["n1", "n2"]);
    notes.untrack("c1");
    expect(notes.list("c1")).toEqual([]);
  });
});

describe("timeline", () => {
  it("interleaves notes with messages by time, whatever the fraction digits", () => {
    const entries = timeline(
      [message("m1", "2026-01-01T10:00:00.123456Z"), message("m2", "2026-01-01T10:00:02Z")],
      [note("n1", "2026-01-01T10:00:01.5Z")],
    );
    expect(entries.map((e) => (e.kind === "message" ? e.message.id : e.note.id))).toEqual(["m1", "n1", "m2"]);
  });
});

describe("the store routes note_added", () => {
  it("to the conversation on screen, redrawing it; other conversations' notes are not kept", () => {
    const deps = {
      queue: { list: async () => ({ items: [], next_cursor: null }), get: async () => { throw new Error("unused"); } },
      conversations: { get: async () => { throw new Error("unused"); } },
      frame: (fn: () => void) => fn(),
      later: () => {},
    } as unknown as StoreDeps;
    const store = new Store("org", "me", deps);
    const open = store.openConversation("c1");
    store.notes.track("c1");
    const before = open.revision;
    const event = (n: Note) => ({ event: "note_added", data: { ...n, org_id: "org", seq: 1 } }) as unknown as RealtimeEvent;
    store.apply(event(note("n1", "2026-01-01T10:00:00Z")));
    store.apply(event(note("n1", "2026-01-01T10:00:00Z")));
    store.apply(event(note("n2", "2026-01-01T10:00:00Z", "c2")));
    expect(store.notes.list("c1").map((n) => n.body)).toEqual(["note n1"]);
    expect(store.notes.list("c2")).toEqual([]);
    expect(open.revision).toBe(before + 1);
  });
});
