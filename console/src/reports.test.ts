import { describe, expect, it } from "vitest";
import {
  type Metrics,
  daysBetween,
  defaultRange,
  expertReleases,
  firstReply,
  messagesPerChannel,
  percent,
  rangeProblem,
  replyShares,
  seconds,
  slaMet,
  calibrationBars,
  thresholdSentences,
} from "./reports";

const metrics: Metrics = {
  org_id: "o",
  from: "2026-11-29",
  to: "2026-12-01",
  time_zone: "UTC",
  calibration: [
    { channel: "slack", from: 0.9, drafts: 3, unchanged: 1, edited: 1, replaced: 1, median_edit_share: 0.3333 },
  ],
  autopilot: [{ channel: "slack", min_confidence: 0.9, enabled: false, would_send: 3, changed: 2 }],
  sla_minutes: 60,
  messages: [
    { day: "2026-11-29", channel: "whatsapp", inbound: 2, outbound: 1 },
    { day: "2026-11-29", channel: "slack", inbound: 3, outbound: 3 },
    { day: "2026-12-01", channel: "slack", inbound: 1, outbound: 0 },
  ],
  first_reply: [{ day: "2026-12-01", customer_messages: 4, answered: 3, p50_secs: 90, p90_secs: 246 }],
  releases: [
    { day: "2026-11-29", releases: 4, draft: 2, edited: 1, own: 1, sla_met: 3, sla_known: 4 },
    { day: "2026-12-01", releases: 1, draft: 0, edited: 0, own: 1, sla_met: 0, sla_known: 0 },
  ],
  experts: [
    { user_id: "a", email: "a@x.test", display_name: "Ada", releases: 4 },
    { user_id: null, email: null, display_name: null, releases: 1 },
  ],
};
const days = daysBetween(metrics.from, metrics.to);

describe("ranges", () => {
  it("lists every day, both ends included, across a month's end", () => {
    expect(days).toEqual(["2026-11-29", "2026-11-30", "2026-12-01"]);
    expect(daysBetween("2026-12-01", "2026-12-01")).toEqual(["2026-12-01"]);
  });
  it("defaults to the last seven days, today included", () => {
    expect(defaultRange(new Date(2026, 11, 4, 15))).toEqual({ from: "2026-11-28", to: "2026-12-04" });
  });
  it("refuses reversed, too long and unreal ranges", () => {
    expect(rangeProblem("2026-12-02", "2026-12-01")).toMatch(/after/);
    expect(rangeProblem("2026-01-01", "2026-04-02")).toBeNull(); // 92 days
    expect(rangeProblem("2026-01-01", "2026-04-03")).toMatch(/92/);
    expect(rangeProblem("2026-11-31", "2026-12-01")).toMatch(/Pick/);
    expect(rangeProblem("", "2026-12-01")).toMatch(/Pick/);
  });
});

describe("series", () => {
  it("fills the days without messages with zeros, channels in a fixed order", () => {
    expect(messagesPerChannel(metrics, days)).toEqual([
      { channel: "slack", inbound: [3, 0, 1], outbound: [3, 0, 0], total: [6, 0, 1] },
      { channel: "whatsapp", inbound: [2, 0, 0], outbound: [1, 0, 0], total: [3, 0, 0] },
    ]);
  });
  it("leaves a gap, not a zero, on days without an answered message", () => {
    expect(firstReply(metrics, days)).toEqual({
      p50: [null, null, 90],
      p90: [null, null, 246],
      customer: [0, 0, 4],
      answered: [0, 0, 3],
    });
  });
  it("computes SLA met per day and overall over releases with a deadline", () => {
    expect(slaMet(metrics, days)).toEqual({ daily: [75, null, null], met: 3, known: 4, overall: 75 });
    expect(percent(1, 3)).toBe(33.3);
    expect(percent(0, 0)).toBeNull();
  });
  it("shares replies between draft, edited and own text", () => {
    expect(replyShares(metrics)).toEqual([
      { kind: "draft", count: 2, share: 40 },
      { kind: "edited", count: 1, share: 20 },
      { kind: "own", count: 2, share: 40 },
    ]);
    expect(replyShares({ ...metrics, releases: [] }).map((s) => s.share)).toEqual([null, null, null]);
  });
  it("names experts, and a deleted one too", () => {
    expect(expertReleases(metrics)).toEqual([
      { name: "Ada", releases: 4 },
      { name: "A former member", releases: 1 },
    ]);
  });
  it("reads waits as people do", () => {
    expect([seconds(null), seconds(44.6), seconds(90), seconds(7200)]).toEqual(["—", "45 s", "1.5 min", "2.0 h"]);
  });
});

describe("the autopilot's calibration", () => {
  it("labels each band and answers what the threshold would have sent", () => {
    expect(calibrationBars(metrics)).toEqual([{ label: "slack 0.9–1.0", unchanged: 1, edited: 1, replaced: 1, medianEdit: 33 }]);
    expect(thresholdSentences(metrics)).toEqual([
      "At 0.90 on slack (off now), 3 of these drafts would have been sent by the autopilot, of which 2 were changed by an expert.",
    ]);
  });
});
