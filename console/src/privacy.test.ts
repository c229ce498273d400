import { describe, expect, it } from "vitest";
import { erasedText } from "./views/context";
import { MAX_RETENTION_DAYS, auditRange, retentionChoice, retentionText } from "./views/org-settings";

describe("the retention field", () => {
  it("asks for a whole number of days in bounds, or nothing kept back", () => {
    expect(retentionChoice(true, "")).toEqual({ days: null });
    expect(retentionChoice(true, "abc")).toEqual({ days: null });
    expect(retentionChoice(false, "30")).toEqual({ days: 30 });
    expect(retentionChoice(false, "1")).toEqual({ days: 1 });
    expect(retentionChoice(false, String(MAX_RETENTION_DAYS))).toEqual({ days: MAX_RETENTION_DAYS });
    for (const bad of ["", " ", "0", "-3", "2.5", "3651", "ten"]) {
      expect(retentionChoice(false, bad), bad).toHaveProperty("problem");
    }
  });

  it("says what the window does", () => {
    expect(retentionText(null)).toMatch(/until a customer is erased/);
    expect(retentionText(1)).toMatch(/older than 1 day are deleted/);
    expect(retentionText(30)).toMatch(/older than 30 days/);
  });
});

describe("the audit log's range", () => {
  it("takes whole days, the last one included, and refuses a reversed range", () => {
    const r = auditRange("2026-03-01", "2026-03-01");
    expect("problem" in r).toBe(false);
    if (!("problem" in r)) {
      expect(Date.parse(r.until ?? "") - Date.parse(r.since ?? "")).toBe(24 * 3600 * 1000);
    }
    expect(auditRange("", "")).toEqual({ since: undefined, until: undefined });
    expect(auditRange("2026-03-02", "2026-03-01")).toHaveProperty("problem");
  });
});

describe("what an erasure reports", () => {
  it("names what went, leaving zeros out", () => {
    const counts = {
      channel_failures: 0,
      conversation_notes: 1,
      conversations: 2,
      customers: 1,
      drafts: 3,
      events_rewritten: 4,
      expert_queue: 2,
      idempotency_keys: 0,
      inbound_events: 5,
      messages: 7,
      outbox: 1,
    };
    expect(erasedText(counts)).toBe("2 conversations, 7 messages, 3 drafts, 1 note, 1 reply, 5 inbox events");
    expect(erasedText({ ...counts, outbox: 2 })).toMatch(/2 replies/);
    expect(erasedText(null)).toBe("");
  });
});
