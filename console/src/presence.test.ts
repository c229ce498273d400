// The presence board: the latest announcement per conversation, without the expert
// themself, forgotten after its TTL, and robust to malformed payloads.

import { describe, expect, it } from "vitest";
import { PresenceBoard } from "./presence";

function board() {
  let now = 1_000_000;
  const b = new PresenceBoard({ now: () => now });
  return { b, advance: (ms: number) => (now += ms) };
}

const ann = { user_id: "u-ann", name: "Ann" };
const me = { user_id: "u-me", name: "Me" };

describe("PresenceBoard", () => {
  it("shows the others viewing a conversation, never me", () => {
    const { b } = board();
    expect(b.receive({ conversation_id: "c1", viewers: [ann, me], ttl_secs: 10 })).toBe(true);
    expect(b.viewers("c1", "u-me")).toEqual([ann]);
    expect(b.viewers("c2", "u-me")).toEqual([]);
  });

  it("replaces a conversation's viewers with the latest announcement", () => {
    const { b } = board();
    b.receive({ conversation_id: "c1", viewers: [ann], ttl_secs: 10 });
    b.receive({ conversation_id: "c1", viewers: [], ttl_secs: 10 });
    expect(b.viewers("c1", "u-me")).toEqual([]);
  });

  it("forgets an announcement after its TTL, telling the subscribers", () => {
    const { b, advance } = board();
    let calls = 0;
    b.subscribe(() => calls++);
    b.receive({ conversation_id: "c1", viewers: [ann], ttl_secs: 10 });
    advance(9_000);
    expect(b.sweep()).toBe(false);
    expect(b.viewers("c1", "u-me")).toEqual([ann]);
    advance(1_001);
    expect(b.sweep()).toBe(true);
    expect(b.viewers("c1", "u-me")).toEqual([]);
    expect(calls).toBe(2);
  });

  it("drops malformed payloads and malformed viewers", () => {
    const { b } = board();
    expect(b.receive(null)).toBe(false);
    expect(b.receive({ viewers: [] })).toBe(false);
    expect(b.receive({ conversation_id: "c1", viewers: "Ann" })).toBe(false);
    b.receive({ conversation_id: "c1", viewers: [ann, { user_id: 3 }, null], ttl_secs: 10 });
    expect(b.viewers("c1", "u-me")).toEqual([ann]);
  });
});
