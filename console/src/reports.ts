// The reports page's data, shaped for its charts and tables: every day of the range present
// (the server leaves out days without activity), channels as series, SLA and reply shares
// as percentages. Pure functions, so the numbers on screen are tested without a browser.

import type { Channel, Schemas } from "./types";

export type Metrics = Schemas["MetricsView"];

/** The longest range the server answers, in days (both ends included). */
export const MAX_DAYS = 92;
/** The range shown first: the last week, today included. */
export const DEFAULT_DAYS = 7;

const DAY_MS = 86_400_000;

/** `YYYY-MM-DD` of a local calendar day. */
export function isoDay(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** Milliseconds of a `YYYY-MM-DD` at UTC midnight, or NaN when it is not a real day. */
function dayValue(day: string): number {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return NaN;
  const t = Date.parse(`${day}T00:00:00Z`);
  return Number.isNaN(t) || new Date(t).toISOString().slice(0, 10) !== day ? NaN : t;
}

/** The last `DEFAULT_DAYS` days up to `today`. */
export function defaultRange(today = new Date()): { from: string; to: string } {
  return lastDays(DEFAULT_DAYS, today);
}

/** Why a range cannot be asked for, or null when it can. */
export function rangeProblem(from: string, to: string): string | null {
  const a = dayValue(from);
  const b = dayValue(to);
  if (Number.isNaN(a) || Number.isNaN(b)) return "Pick a start and an end date.";
  if (a > b) return "The start date must not be after the end date.";
  if ((b - a) / DAY_MS + 1 > MAX_DAYS) return `A report covers at most ${MAX_DAYS} days.`;
  return null;
}

/** Every day from `from` to `to`, both included. */
export function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  const end = dayValue(to);
  for (let t = dayValue(from); t <= end && out.length <= MAX_DAYS; t += DAY_MS) {
    out.push(new Date(t).toISOString().slice(0, 10));
  }
  return out;
}

/** The channels in the reports' order (a channel the console does not know yet goes last). */
function inChannelOrder(channels: Iterable<string>): string[] {
  const order = ["slack", "whatsapp", "telegram", "email"];
  return [...new Set(channels)].sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b));
}

/** Messages (in and out) per channel, one value per day; channels in a fixed order. */
export function messagesPerChannel(m: Metrics, days: string[]): { channel: string; inbound: number[]; outbound: number[]; total: number[] }[] {
  const channels = inChannelOrder(m.messages.map((r) => r.channel));
  return channels.map((channel) => {
    const byDay = new Map(m.messages.filter((r) => r.channel === channel).map((r) => [r.day, r]));
    const inbound = days.map((d) => byDay.get(d)?.inbound ?? 0);
    const outbound = days.map((d) => byDay.get(d)?.outbound ?? 0);
    return { channel, inbound, outbound, total: inbound.map((n, i) => n + outbound[i]) };
  });
}

/** First-reply percentiles per day in seconds; null on a day without an answered message. */
export function firstReply(m: Metrics, days: string[]): { p50: (number | null)[]; p90: (number | null)[]; customer: number[]; answered: number[] } {
  const byDay = new Map(m.first_reply.map((r) => [r.day, r]));
  return {
    p50: days.map((d) => byDay.get(d)?.p50_secs ?? null),
    p90: days.map((d) => byDay.get(d)?.p90_secs ?? null),
    customer: days.map((d) => byDay.get(d)?.customer_messages ?? 0),
    answered: days.map((d) => byDay.get(d)?.answered ?? 0),
  };
}

/** Percentage with one decimal, or null when there is nothing to divide. */
export function percent(part: number, whole: number): number | null {
  return whole > 0 ? Math.round((part / whole) * 1000) / 10 : null;
}

/** SLA met per day (null on a day without releases that had a deadline), and overall. */
export function slaMet(m: Metrics, days: string[]): { daily: (number | null)[]; met: number; known: number; overall: number | null } {
  const byDay = new Map(m.releases.map((r) => [r.day, r]));
  const met = m.releases.reduce((n, r) => n + r.sla_met, 0);
  const known = m.releases.reduce((n, r) => n + r.sla_known, 0);
  return {
    daily: days.map((d) => {
      const r = byDay.get(d);
      return r ? percent(r.sla_met, r.sla_known) : null;
    }),
    met,
    known,
    overall: percent(met, known),
  };
}

export type ReplyKind = "draft" | "edited" | "own";
export const REPLY_LABEL: Record<ReplyKind, string> = {
  draft: "Draft unchanged",
  edited: "Draft edited",
  own: "Expert's own text",
};

/** How the range's replies were made: counts and shares. */
export function replyShares(m: Metrics): { kind: ReplyKind; count: number; share: number | null }[] {
  const total = m.releases.reduce((n, r) => n + r.releases, 0);
  return (["draft", "edited", "own"] as const).map((kind) => {
    const count = m.releases.reduce((n, r) => n + r[kind], 0);
    return { kind, count, share: percent(count, total) };
  });
}

/** Releases per expert, most first, each with a name to show. */
export function expertReleases(m: Metrics): { name: string; releases: number }[] {
  return m.experts.map((e) => ({ name: e.display_name || e.email || "A former member", releases: e.releases }));
}

/** A wait in seconds as people read it: "45 s", "3.5 min", "2.1 h"; "—" for none. */
export function seconds(value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  if (value < 60) return `${Math.round(value)} s`;
  if (value < 3600) return `${(value / 60).toFixed(1)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

/** A day for axes and tables: "Mon 1 Dec". */
export function dayLabel(day: string): string {
  const t = dayValue(day);
  if (Number.isNaN(t)) return day;
  return new Date(t).toLocaleDateString("en-GB", { weekday: "short", day: "numeric", month: "short", timeZone: "UTC" });
}

export type Threshold = Metrics["autopilot"][number];

/** One 0.1-wide confidence band of a channel's drafts, and what experts did with them. */
export type Band = { from: number; label: string; unchanged: number; edited: number; replaced: number; medianEdit: number | null };

/** A channel's calibration: its ten bands, 0.0–0.1 to 0.9–1.0, and the org's threshold. */
export type ChannelCalibration = {
  channel: string;
  bands: Band[];
  drafts: number;
  threshold: Threshold | null;
  /** The report's range, which the threshold's counts are over. */
  range: { from: string; to: string };
};

/**
 * The calibration per channel that has drafts in the range or a threshold in the org's
 * policy. Every band is present (zeros where no draft fell), so that the bands are the
 * confidence axis and the threshold can be drawn where it lies on it.
 */
export function calibrationByChannel(m: Metrics): ChannelCalibration[] {
  return inChannelOrder([...m.calibration.map((b) => b.channel), ...m.autopilot.map((t) => t.channel)]).map((channel) => {
    const bands = Array.from({ length: 10 }, (_, tenth): Band => {
      const b = m.calibration.find((x) => x.channel === channel && Math.round(x.from * 10) === tenth);
      return {
        from: tenth / 10,
        label: `${(tenth / 10).toFixed(1)}–${((tenth + 1) / 10).toFixed(1)}`,
        unchanged: b?.unchanged ?? 0,
        edited: b?.edited ?? 0,
        replaced: b?.replaced ?? 0,
        medianEdit: b?.median_edit_share == null ? null : Math.round(b.median_edit_share * 100),
      };
    });
    const drafts = m.calibration.filter((b) => b.channel === channel).reduce((n, b) => n + b.drafts, 0);
    return { channel, bands, drafts, threshold: m.autopilot.find((t) => t.channel === channel) ?? null, range: { from: m.from, to: m.to } };
  });
}

/**
 * Where a threshold lies on the ten bands' axis, counted in bands from the first band's
 * centre (a category scale's units: band i spans i − 0.5 to i + 0.5), so 0.9 is the edge
 * between the 0.8–0.9 and 0.9–1.0 bands.
 */
export function thresholdAt(minConfidence: number): number {
  return Math.min(1, Math.max(0, minConfidence)) * 10 - 0.5;
}

/** The line's label on the chart: "threshold 0.90", "(off)" while the channel does not send. */
export function thresholdLabel(t: Threshold): string {
  return `threshold ${t.min_confidence.toFixed(2)}${t.enabled ? "" : " (off)"}`;
}

/** Whether a band's drafts are at or above the threshold: all of them, none, or some. */
export function bandAgainst(band: Band, t: Threshold): "yes" | "no" | "in part" {
  if (band.from >= t.min_confidence - 1e-9) return "yes";
  if (band.from + 0.1 <= t.min_confidence + 1e-9) return "no";
  return "in part";
}

/** The range a report covers, said as the threshold's sentence says it: "the last 30 days'"
 * when it ends today, "Fri 6 Nov to Sat 5 Dec's" otherwise. */
export function rangePhrase(range: { from: string; to: string }, today: string): string {
  if (range.to === today) {
    const n = daysBetween(range.from, range.to).length;
    return n === 1 ? "today's" : `the last ${n} days'`;
  }
  return `${dayLabel(range.from)} to ${dayLabel(range.to)}'s`;
}

/** "At 0.90 on slack, 3 of the last 30 days' drafts would have been sent by the autopilot,
 * of which 2 were changed by an expert." */
export function thresholdSentence(t: Threshold, range: { from: string; to: string }, today = defaultRange().to): string {
  return `At ${t.min_confidence.toFixed(2)} on ${t.channel}${t.enabled ? "" : " (off now)"}, ${t.would_send} of ${rangePhrase(range, today)} drafts would have been sent by the autopilot, of which ${t.changed} ${t.changed === 1 ? "was" : "were"} changed by an expert.`;
}

/** One sentence per channel of the org's policy. */
export function thresholdSentences(m: Metrics, today = defaultRange().to): string[] {
  return m.autopilot.map((t) => thresholdSentence(t, m, today));
}

/** The range of the last `days` days, today included: the calibration's usual window. */
export function lastDays(days: number, today = new Date()): { from: string; to: string } {
  const from = new Date(today);
  from.setDate(from.getDate() - (days - 1));
  return { from: isoDay(from), to: isoDay(today) };
}

export type Policy = Schemas["Policy"];
export type ChannelRule = Schemas["ChannelPolicy"];

/** A threshold typed on the page: its value, or why it cannot be saved. */
export function thresholdValue(text: string): { value: number } | { problem: string } {
  const value = Number(text.trim());
  if (text.trim() === "" || !Number.isFinite(value) || value < 0 || value > 1) {
    return { problem: "The threshold is the agent's confidence a draft needs, from 0 to 1 (e.g. 0.85)." };
  }
  return { value };
}

/** A hold typed on the page, in seconds: its value, or why it cannot be saved. */
export function holdValue(text: string): { value: number } | { problem: string } {
  const value = Number(text.trim());
  if (text.trim() === "" || !Number.isInteger(value) || value < 10 || value > 3600) {
    return { problem: "The hold is a whole number of seconds from 10 to 3600, during which an expert can stop the draft." };
  }
  return { value };
}

/**
 * The policy with `channel`'s rule replaced, everything else kept. Turning a channel on
 * turns the org's switch on too (the header's Pause turns it off again); turning it off
 * leaves the org's switch as it was.
 */
export function withChannelRule(policy: Policy, channel: Channel, rule: ChannelRule): Policy {
  return {
    ...policy,
    enabled: rule.enabled ? true : (policy.enabled ?? false),
    channels: { ...policy.channels, [channel]: rule },
  };
}

/** The channels whose drafts can send themselves under `policy`, in the reports' order. */
export function sendingChannels(policy: Policy): Channel[] {
  if (!policy.enabled) return [];
  const channels = policy.channels ?? {};
  return inChannelOrder(Object.keys(channels)).filter((c): c is Channel => channels[c as Channel]?.enabled === true);
}
