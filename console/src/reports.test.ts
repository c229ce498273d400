import { describe, expect, it } from "vitest";
import {
  type Metrics,
  daysBetween,
  defaultRange,
  lastDays,
  rangePhrase,
  expertReleases,
  firstReply,
  messagesPerChannel,
  percent,
  rangeProblem,
  replyShares,
  seconds,
  slaMet,
  bandAgainst,
  calibrationByChannel,
  holdValue,
  sendingChannels,
  thresholdValue,
  withChannelRule,
  thresholdAt,
  thresholdLabel,
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
  it("gives each channel its ten bands, zeros where no draft fell, with its threshold", () => {
    const [slack, ...rest] = calibrationByChannel(metrics);
    expect(rest).toEqual([]);
    expect(slack.channel).toBe("slack");
    expect(slack.drafts).toBe(3);
    expect(slack.bands.map((b) => b.label)).toEqual([
      "0.0–0.1",
      "0.1–0.2",
      "0.2–0.3",
      "0.3–0.4",
      "0.4–0.5",
      "0.5–0.6",
      "0.6–0.7",
      "0.7–0.8",
      "0.8–0.9",
      "0.9–1.0",
    ]);
    expect(slack.bands[9]).toEqual({ from: 0.9, label: "0.9–1.0", unchanged: 1, edited: 1, replaced: 1, medianEdit: 33 });
    expect(slack.bands.slice(0, 9).every((b) => b.unchanged + b.edited + b.replaced === 0 && b.medianEdit === null)).toBe(true);
    expect(slack.threshold).toEqual(metrics.autopilot[0]);
  });
  it("lists a channel with drafts but no threshold, and one with a threshold but no drafts, in the reports' order", () => {
    const m: Metrics = {
      ...metrics,
      calibration: [
        { channel: "email", from: 0.3, drafts: 2, unchanged: 0, edited: 0, replaced: 2, median_edit_share: null },
        { channel: "slack", from: 0.9, drafts: 3, unchanged: 1, edited: 1, replaced: 1, median_edit_share: 0.3333 },
      ],
      autopilot: [{ channel: "telegram", min_confidence: 0.75, enabled: true, would_send: 0, changed: 0 }],
    };
    const out = calibrationByChannel(m);
    expect(out.map((c) => [c.channel, c.drafts, c.threshold?.min_confidence ?? null])).toEqual([
      ["slack", 3, null],
      ["telegram", 0, 0.75],
      ["email", 2, null],
    ]);
    expect(out[2].bands[3].replaced).toBe(2);
    expect(calibrationByChannel({ ...metrics, calibration: [], autopilot: [] })).toEqual([]);
  });
  it("puts the threshold where it lies on the bands' axis", () => {
    // Band i is centred on i: 0.9 is the edge between the 0.8–0.9 and 0.9–1.0 bands.
    expect(thresholdAt(0.9)).toBeCloseTo(8.5);
    expect(thresholdAt(0.85)).toBeCloseTo(8);
    expect(thresholdAt(0)).toBeCloseTo(-0.5);
    expect(thresholdAt(1)).toBeCloseTo(9.5);
    expect(thresholdAt(1.5)).toBeCloseTo(9.5);
    expect(thresholdAt(-1)).toBeCloseTo(-0.5);
  });
  it("labels the line, and says per band whether its drafts are above it", () => {
    const [slack] = calibrationByChannel(metrics);
    const t = metrics.autopilot[0];
    expect(thresholdLabel(t)).toBe("threshold 0.90 (off)");
    expect(thresholdLabel({ ...t, enabled: true, min_confidence: 0.856 })).toBe("threshold 0.86");
    expect(slack.bands.map((b) => bandAgainst(b, t)).join(" ")).toBe("no no no no no no no no no yes");
    const inBand = { ...t, min_confidence: 0.85 };
    expect([7, 8, 9].map((i) => bandAgainst(slack.bands[i], inBand))).toEqual(["no", "in part", "yes"]);
    // 0.3 is 0.2999… in binary: its band is wholly above it.
    expect(bandAgainst(slack.bands[3], { ...t, min_confidence: 0.3 })).toBe("yes");
    expect(bandAgainst(slack.bands[2], { ...t, min_confidence: 0.3 })).toBe("no");
  });
  it("answers what the threshold would have sent, over the range it was counted in", () => {
    expect(thresholdSentences(metrics, "2026-12-01")).toEqual([
      "At 0.90 on slack (off now), 3 of the last 3 days' drafts would have been sent by the autopilot, of which 2 were changed by an expert.",
    ]);
    expect(thresholdSentences(metrics, "2026-12-05")).toEqual([
      "At 0.90 on slack (off now), 3 of Sun 29 Nov to Tue 1 Dec's drafts would have been sent by the autopilot, of which 2 were changed by an expert.",
    ]);
    expect(rangePhrase({ from: "2026-12-01", to: "2026-12-01" }, "2026-12-01")).toBe("today's");
    expect(lastDays(30, new Date(2026, 11, 7, 9))).toEqual({ from: "2026-11-08", to: "2026-12-07" });
  });
});

describe("the threshold set beside the chart", () => {
  it("takes a threshold from 0 to 1 and a hold from 10 to 3600 whole seconds, and says why not", () => {
    expect(thresholdValue("0.85")).toEqual({ value: 0.85 });
    expect(thresholdValue(" 1 ")).toEqual({ value: 1 });
    expect(thresholdValue("0")).toEqual({ value: 0 });
    for (const bad of ["", "1.01", "-0.1", "high", "NaN"]) expect(thresholdValue(bad)).toHaveProperty("problem", expect.stringMatching(/from 0 to 1/));
    expect(holdValue("10")).toEqual({ value: 10 });
    expect(holdValue("3600")).toEqual({ value: 3600 });
    for (const bad of ["", "9", "3601", "30.5", "soon"]) expect(holdValue(bad)).toHaveProperty("problem", expect.stringMatching(/10 to 3600/));
  });
  it("changes only the channel's rule; turning it on turns the org on, turning it off leaves the org as it was", () => {
    const policy = {
      enabled: false,
      channels: { telegram: { enabled: true, min_confidence: 0.7, hold_secs: 30 } },
      never_when: { phrases: ["refund"], new_customer: true },
      max_per_hour: 20,
    };
    const on = withChannelRule(policy, "slack", { enabled: true, min_confidence: 0.85, hold_secs: 60 });
    expect(on).toEqual({
      enabled: true,
      channels: { telegram: { enabled: true, min_confidence: 0.7, hold_secs: 30 }, slack: { enabled: true, min_confidence: 0.85, hold_secs: 60 } },
      never_when: { phrases: ["refund"], new_customer: true },
      max_per_hour: 20,
    });
    expect(policy.channels).not.toHaveProperty("slack");
    const off = withChannelRule(on, "slack", { enabled: false, min_confidence: 0.9, hold_secs: 60 });
    expect(off.enabled).toBe(true);
    expect(off.channels?.slack).toEqual({ enabled: false, min_confidence: 0.9, hold_secs: 60 });
    expect(withChannelRule({}, "email", { enabled: false, min_confidence: 0.5 }).enabled).toBe(false);
  });
  it("names the channels that send themselves, none while the org is off", () => {
    const channels = {
      email: { enabled: true, min_confidence: 0.9 },
      slack: { enabled: true, min_confidence: 0.8 },
      telegram: { enabled: false, min_confidence: 0.8 },
    };
    expect(sendingChannels({ enabled: true, channels })).toEqual(["slack", "email"]);
    expect(sendingChannels({ enabled: false, channels })).toEqual([]);
    expect(sendingChannels({})).toEqual([]);
  });
});
