// When the console alerts an expert whose tab is in the background: only when hidden, only
// after opting in, and only for an item that became pending or became flagged.

import { describe, expect, it } from "vitest";
import { type Before, type Prefs, decide, loadPrefs, priorState } from "./notify";
import type { RealtimeEvent } from "./types";

const ON: Prefs = { notify: true, sound: false };

function itemEvent(
  event: "queue_item_created" | "queue_item_updated",
  over: Partial<{ status: string; flagged_for_review: boolean }> = {},
): RealtimeEvent {
  return {
    event,
    data: {
      id: "item-1",
      conversation_id: "conv-1",
      status: "pending",
      flagged_for_review: false,
      version: 1,
      claimed_by: null,
      org_id: "org-1",
      seq: 7,
      ...over,
    },
  } as RealtimeEvent;
}

const hidden = { hidden: true, prefs: ON };

describe("decide", () => {
  it("alerts for a new pending item while the tab is hidden", () => {
    const alert = decide(itemEvent("queue_item_created"), undefined, hidden);
    expect(alert).toMatchObject({ itemId: "item-1", title: "New item in the queue", tag: "item-item-1" });
  });

  it("stays quiet while the tab is visible", () => {
    expect(decide(itemEvent("queue_item_created"), undefined, { hidden: false, prefs: ON })).toBeNull();
  });

  it("stays quiet until the expert opted in, and alerts for sound alone", () => {
    const event = itemEvent("queue_item_created");
    expect(decide(event, undefined, { hidden: true, prefs: { notify: false, sound: false } })).toBeNull();
    expect(decide(event, undefined, { hidden: true, prefs: { notify: false, sound: true } })).not.toBeNull();
  });

  it("alerts when an item becomes pending again, not when a pending one changes", () => {
    const waiting: Before = { status: "awaiting_client", flagged: false };
    expect(decide(itemEvent("queue_item_updated"), waiting, hidden)?.title).toBe("A customer wrote again");
    const pending: Before = { status: "pending", flagged: false };
    expect(decide(itemEvent("queue_item_updated", { status: "pending" }), pending, hidden)).toBeNull();
  });

  it("alerts when an item becomes flagged, once", () => {
    const before: Before = { status: "pending", flagged: false };
    const flagged = itemEvent("queue_item_updated", { flagged_for_review: true });
    expect(decide(flagged, before, hidden)?.title).toBe("Flagged for review");
    expect(decide(flagged, { status: "pending", flagged: true }, hidden)).toBeNull();
  });

  it("ignores other transitions and other events", () => {
    const before: Before = { status: "pending", flagged: false };
    for (const status of ["claimed", "awaiting_client", "snoozed", "resolved"]) {
      expect(decide(itemEvent("queue_item_updated", { status }), before, hidden)).toBeNull();
    }
    const message = { event: "message_created", data: { org_id: "org-1", seq: 8 } } as unknown as RealtimeEvent;
    expect(decide(message, undefined, hidden)).toBeNull();
  });
});

describe("priorState", () => {
  it("reads the item the event is about, before the event is applied", () => {
    const get = (id: string) => (id === "item-1" ? { status: "snoozed", flagged: true } : undefined);
    expect(priorState(itemEvent("queue_item_updated"), get)).toEqual({ status: "snoozed", flagged: true });
    expect(priorState({ event: "report_ready", data: {} } as unknown as RealtimeEvent, get)).toBeUndefined();
  });
});

describe("prefs", () => {
  it("are off unless saved on, and survive junk", () => {
    expect(loadPrefs({ getItem: () => null })).toEqual({ notify: false, sound: false });
    expect(loadPrefs({ getItem: () => "{not json" })).toEqual({ notify: false, sound: false });
    expect(loadPrefs({ getItem: () => '{"notify":true,"sound":"yes"}' })).toEqual({ notify: true, sound: false });
  });
});
