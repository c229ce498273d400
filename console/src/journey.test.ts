import { describe, expect, it } from "vitest";
import { type JourneyStep, journeyLine, journeySummary, seconds, stepLabel } from "./journey";

function step(name: JourneyStep["step"], at: string, detail: Record<string, unknown> = {}): JourneyStep {
  return {
    step: name,
    at,
    since_start_ms: 0,
    pod: "pod-a",
    message_id: "m1",
    this_message: true,
    detail: detail as JourneyStep["detail"],
    trace_id: null,
  };
}

describe("journey", () => {
  it("reads the issue's example", () => {
    const steps = [
      step("received", "2026-01-05T10:02:03.120Z"),
      step("drafted", "2026-01-05T10:02:05Z", { agent_ms: 1834, fallback: false, confidence: 0.9 }),
      step("released", "2026-01-05T10:39:51Z", { by: "user", name: "Ada", reply: "draft", unchanged: true }),
      step("delivered", "2026-01-05T10:39:52Z", { parts: 1 }),
    ];
    expect(journeySummary(steps, "UTC")).toBe(
      "10:02:03 received · 10:02:05 drafted (1.8 s) · 10:39:51 released by Ada · 10:39:52 delivered",
    );
  });

  it("names each step's outcome without provider or customer words", () => {
    expect(stepLabel(step("attempt", "2026-01-05T10:00:00Z", { attempt: 1, outcome: "retry", status: 500 }))).toBe(
      "attempt 1: HTTP 500",
    );
    expect(stepLabel(step("attempt", "2026-01-05T10:00:00Z", { attempt: 2, outcome: "retry", error_class: "timeout" }))).toBe(
      "attempt 2: timeout",
    );
    expect(stepLabel(step("attempt", "2026-01-05T10:00:00Z", { attempt: 3, outcome: "accepted" }))).toBe("attempt 3: accepted");
    expect(stepLabel(step("drafted", "2026-01-05T10:00:00Z", { agent_ms: 12000, fallback: true }))).toBe(
      "drafted (12.0 s, fallback)",
    );
    expect(stepLabel(step("released", "2026-01-05T10:00:00Z", { by: "autopilot", rule: "faq", reply: "draft" }))).toBe(
      "released by the autopilot (faq)",
    );
    expect(stepLabel(step("released", "2026-01-05T10:00:00Z", { by: "user", name: "Ada", reply: "edited" }))).toBe(
      "released by Ada, edited",
    );
    expect(stepLabel(step("claimed", "2026-01-05T10:00:00Z", {}))).toBe("claimed by an expert");
    expect(stepLabel(step("queued", "2026-01-05T10:00:00Z", { attempt: 2 }))).toBe("queued (attempt 2)");
    expect(stepLabel(step("shown", "2026-01-05T10:00:00Z", { status: "auto_pending" }))).toBe("shown, held by the autopilot");
    expect(stepLabel(step("dead_lettered", "2026-01-05T10:00:00Z", { dead: false }))).toBe("dead-lettered");
    expect(journeyLine(step("committed", "2026-01-05T23:59:59.999Z"), "UTC")).toBe("23:59:59 committed");
  });

  it("says durations the way people do", () => {
    expect(seconds(1834)).toBe("1.8 s");
    expect(seconds(40)).toBe("0.0 s");
    expect(seconds(125_000)).toBe("2 min 5 s");
    expect(seconds(120_000)).toBe("2 min");
  });
});
