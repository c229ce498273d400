// `#/reports`, for an org's admins: charts of the org's activity over a range of days
// (messages per channel, time to first reply, SLA met, what replies were made of, releases
// per expert, and per channel the autopilot's calibration with the org's threshold drawn on
// it), the org's SLA setting, and the reports the scheduler wrote.
//
// Charts are Chart.js on canvas, registered piece by piece so the bundle carries only what
// is drawn. It fits the CSP: no <style> element and no data: URL; it sizes the canvas
// through element.style (CSSOM), which `style-src 'self'` allows. A canvas says nothing to
// a screen reader, so each chart is a figure with a one-line summary as its label and the
// same numbers in a table below it.

import "./reports.css";
import {
  ArcElement,
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  DoughnutController,
  Legend,
  LineController,
  LineElement,
  LinearScale,
  type Plugin,
  PointElement,
  Tooltip,
} from "chart.js";
import { ApiError } from "../api";
import { h, mount } from "../dom";
import { autopilot, reports } from "../endpoints";
import { CHANNEL_LABEL, clock } from "../format";
import {
  type ChannelCalibration,
  type Metrics,
  type Policy,
  REPLY_LABEL,
  bandAgainst,
  calibrationByChannel,
  dayLabel,
  daysBetween,
  defaultRange,
  expertReleases,
  firstReply,
  messagesPerChannel,
  rangeProblem,
  replyShares,
  seconds,
  holdValue,
  sendingChannels,
  slaMet,
  thresholdAt,
  thresholdLabel,
  thresholdSentence,
  lastDays,
  thresholdValue,
  withChannelRule,
} from "../reports";
import type { Channel, Schemas } from "../types";

Chart.register(
  ArcElement,
  BarController,
  BarElement,
  CategoryScale,
  DoughnutController,
  Legend,
  LineController,
  LineElement,
  LinearScale,
  PointElement,
  Tooltip,
);

/** Colours told apart by most kinds of colour blindness (Okabe–Ito), dark enough on white. */
const COLOURS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"];

/** The charts on screen, destroyed before the page draws new ones. */
let charts: Chart[] = [];

function clearCharts(): void {
  for (const c of charts) c.destroy();
  charts = [];
}

function problem(e: unknown, what: string): string {
  if (e instanceof ApiError && e.status === 403) return `Only an admin of this org can see ${what}.`;
  return `Could not load ${what}: ${(e as Error).message}`;
}

function table(caption: string, head: string[], rows: (string | number)[][]): HTMLElement {
  return h(
    "table",
    { class: "grid" },
    h("caption", { text: caption }),
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col", text: c })))),
    h(
      "tbody",
      {},
      rows.map((r) => h("tr", {}, r.map((cell, i) => (i === 0 ? h("th", { scope: "row", text: String(cell) }) : h("td", { text: String(cell) }))))),
    ),
  );
}

/**
 * A chart with its summary and its numbers as a table. `id` names the figure (tests and
 * the label); the canvas is an image whose text is the summary.
 */
function figure(id: string, title: string, summary: string, data: HTMLElement, draw: (canvas: HTMLCanvasElement) => Chart | null): HTMLElement {
  const canvas = h("canvas", { role: "img", "aria-label": `${title}. ${summary}` });
  const fig = h(
    "figure",
    { class: "report-chart", id, "aria-labelledby": `${id}-title` },
    h("figcaption", {}, h("h3", { id: `${id}-title`, text: title }), h("p", { class: "muted summary", text: summary })),
    h("div", { class: "chart-box" }, canvas),
    h("details", { class: "chart-data" }, h("summary", { text: `${title}: the numbers` }), data),
  );
  // Drawn once the figure is in the document, so the chart knows its size.
  queueMicrotask(() => {
    const chart = draw(canvas);
    if (chart) charts.push(chart);
  });
  return fig;
}

const common = {
  animation: false as const,
  responsive: true,
  maintainAspectRatio: false,
  plugins: { legend: { position: "bottom" as const } },
};

function charts_(m: Metrics, autopilotForm: AutopilotForm): HTMLElement[] {
  const days = daysBetween(m.from, m.to);
  const labels = days.map(dayLabel);
  const perChannel = messagesPerChannel(m, days);
  const total = perChannel.reduce((n, c) => n + c.total.reduce((a, b) => a + b, 0), 0);
  const fr = firstReply(m, days);
  const answered = fr.answered.reduce((a, b) => a + b, 0);
  const customers = fr.customer.reduce((a, b) => a + b, 0);
  const sla = slaMet(m, days);
  const unit = waitUnit(fr.p90);
  const shares = replyShares(m);
  const experts = expertReleases(m);
  const channelName = (c: string) => CHANNEL_LABEL[c as Channel] ?? c;

  const messages = figure(
    "chart-messages",
    "Messages per channel per day",
    total === 0
      ? "No messages in this range."
      : `${total} messages: ${perChannel.map((c) => `${channelName(c.channel)} ${c.total.reduce((a, b) => a + b, 0)}`).join(", ")}.`,
    table(
      "Messages per channel per day (in / out)",
      ["Day", ...perChannel.map((c) => channelName(c.channel))],
      days.map((d, i) => [dayLabel(d), ...perChannel.map((c) => `${c.inbound[i]} in / ${c.outbound[i]} out`)]),
    ),
    (canvas) =>
      new Chart(canvas, {
        type: "bar",
        data: {
          labels,
          datasets: perChannel.map((c, i) => ({ label: channelName(c.channel), data: c.total, backgroundColor: COLOURS[i % COLOURS.length] })),
        },
        options: { ...common, scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } } } },
      }),
  );

  const firstReplyFig = figure(
    "chart-first-reply",
    "Time to first reply",
    answered === 0
      ? `No customer message has been answered in this range (${customers} received).`
      : `${answered} of ${customers} customer messages answered. On a typical day half were answered within ${seconds(median(fr.p50))} (p50), nine in ten within ${seconds(median(fr.p90))} (p90).`,
    table(
      "Time from a customer message to the first reply after it",
      ["Day", "Customer messages", "Answered", "p50", "p90"],
      days.map((d, i) => [dayLabel(d), fr.customer[i], fr.answered[i], seconds(fr.p50[i]), seconds(fr.p90[i])]),
    ),
    (canvas) =>
      new Chart(canvas, {
        type: "line",
        data: {
          labels,
          datasets: [
            { label: `p50 (${unit.name})`, data: fr.p50.map(unit.of), borderColor: COLOURS[0], backgroundColor: COLOURS[0], spanGaps: true },
            { label: `p90 (${unit.name})`, data: fr.p90.map(unit.of), borderColor: COLOURS[1], backgroundColor: COLOURS[1], spanGaps: true },
          ],
        },
        options: { ...common, scales: { y: { beginAtZero: true, title: { display: true, text: unit.name } } } },
      }),
  );

  const slaFig = figure(
    "chart-sla",
    "SLA met",
    sla.known === 0
      ? `No reply with a deadline was released in this range. The SLA is ${m.sla_minutes} minutes.`
      : `${sla.overall}% of ${sla.known} replies were released within the SLA (${m.sla_minutes} minutes now).`,
    table(
      "Replies released within the SLA, per day",
      ["Day", "Met", "Of", "Share"],
      days.map((d, i) => {
        const r = m.releases.find((x) => x.day === d);
        return [dayLabel(d), r?.sla_met ?? 0, r?.sla_known ?? 0, sla.daily[i] === null ? "—" : `${sla.daily[i]}%`];
      }),
    ),
    (canvas) =>
      new Chart(canvas, {
        type: "bar",
        data: { labels, datasets: [{ label: "SLA met (%)", data: sla.daily, backgroundColor: COLOURS[2] }] },
        options: { ...common, scales: { y: { beginAtZero: true, max: 100, title: { display: true, text: "%" } } } },
      }),
  );

  const releases = shares.reduce((n, s) => n + s.count, 0);
  const sharesFig = figure(
    "chart-replies",
    "What replies were made of",
    releases === 0
      ? "No reply was released in this range."
      : `${releases} replies: ${shares.map((s) => `${REPLY_LABEL[s.kind].toLowerCase()} ${s.share}%`).join(", ")}.`,
    table(
      "Replies by what they were made of",
      ["Reply", "Count", "Share"],
      shares.map((s) => [REPLY_LABEL[s.kind], s.count, s.share === null ? "—" : `${s.share}%`]),
    ),
    (canvas) =>
      releases === 0
        ? null
        : new Chart(canvas, {
            type: "doughnut",
            data: {
              labels: shares.map((s) => REPLY_LABEL[s.kind]),
              datasets: [{ label: "Replies", data: shares.map((s) => s.count), backgroundColor: COLOURS.slice(0, 3) }],
            },
            options: common,
          }),
  );

  const expertsFig = figure(
    "chart-experts",
    "Releases per expert",
    experts.length === 0
      ? "No reply was released in this range."
      : `${experts.length} expert${experts.length === 1 ? "" : "s"}; most releases: ${experts[0].name} (${experts[0].releases}).`,
    table("Replies released per expert", ["Expert", "Releases"], experts.map((e) => [e.name, e.releases])),
    (canvas) =>
      experts.length === 0
        ? null
        : new Chart(canvas, {
            type: "bar",
            data: { labels: experts.map((e) => e.name), datasets: [{ label: "Releases", data: experts.map((e) => e.releases), backgroundColor: COLOURS[0] }] },
            options: { ...common, indexAxis: "y" as const, plugins: { legend: { display: false } }, scales: { x: { beginAtZero: true, ticks: { precision: 0 } } } },
          }),
  );
  const calibration = calibrationByChannel(m).map((c) => calibrationFigure(c, channelName(c.channel), autopilotForm));
  if (calibration.length === 0) {
    calibration.push(
      figure(
        "chart-calibration",
        "Autopilot calibration",
        "No draft was released or replaced in this range, and the autopilot has no threshold on any channel.",
        table("Drafts per confidence band", ["Band", "Sent unchanged", "Edited", "Replaced"], []),
        () => null,
      ),
    );
  }
  return [messages, firstReplyFig, slaFig, sharesFig, expertsFig, ...calibration];
}

/** The threshold's line and label; not one of the bar colours, so it reads as a rule, not data. */
const THRESHOLD_COLOUR = "#1b1b1b";

/** Where the threshold's line is drawn, and its label; null: no line. */
type Line = { at: number; label: string } | null;

/**
 * Draws the threshold across the chart at its place on the confidence axis, with its label:
 * the org's, or the one an admin is typing. Chart.js draws nothing at an x value by itself;
 * the annotation plugin would be a dependency for one line.
 */
function thresholdLine(line: () => Line): Plugin<"bar"> {
  return {
    id: "threshold",
    afterDatasetsDraw(chart) {
      const shown = line();
      if (!shown) return;
      const { ctx, chartArea } = chart;
      // Whole pixels and an even width: the line is crisp, two device pixels of one colour.
      const x = Math.round(chart.scales.x.getPixelForValue(shown.at));
      ctx.save();
      ctx.strokeStyle = THRESHOLD_COLOUR;
      ctx.fillStyle = THRESHOLD_COLOUR;
      ctx.lineWidth = 2;
      ctx.setLineDash([6, 3]);
      ctx.beginPath();
      ctx.moveTo(x, chartArea.top);
      ctx.lineTo(x, chartArea.bottom);
      ctx.stroke();
      ctx.font = "12px system-ui, sans-serif";
      ctx.textBaseline = "top";
      // Beside the line, on the side with room for the text.
      const right = x + 4 + ctx.measureText(shown.label).width <= chartArea.right;
      ctx.textAlign = right ? "left" : "right";
      ctx.fillText(shown.label, right ? x + 4 : x - 4, chartArea.top + 2);
      ctx.restore();
    },
  };
}

/** What a calibration chart's threshold form needs from the page. */
type AutopilotForm = {
  orgId: string;
  /** The org's policy as GET /orgs/{id}/autopilot gave it (null: it could not be read). */
  policy: Policy | null;
  /** After a save: says `message` where it outlives the charts, and draws them again. */
  saved: (message: string) => void;
};

/**
 * One channel's calibration: what experts did with its drafts per confidence band, and the
 * org's threshold for it drawn as a line. The summary (the canvas's text) and the table say
 * where the line is and what it would have sent, for those who cannot see the chart.
 */
function calibrationFigure(c: ChannelCalibration, name: string, form: AutopilotForm): HTMLElement {
  const t = c.threshold;
  const saved: Line = t ? { at: thresholdAt(t.min_confidence), label: thresholdLabel(t) } : null;
  let line = saved;
  let chart: Chart | null = null;
  const withDrafts = c.bands.filter((b) => b.unchanged + b.edited + b.replaced > 0).length;
  const summary = [
    c.drafts === 0
      ? `No ${name} draft was released or replaced in this range.`
      : `${c.drafts} ${name} draft${c.drafts === 1 ? "" : "s"} in ${withDrafts} confidence band${withDrafts === 1 ? "" : "s"}.`,
    t
      ? `The dashed line marks the org's threshold for ${name}, ${t.min_confidence.toFixed(2)}${t.enabled ? "" : ", off now"}: drafts at or right of it would send themselves. ${thresholdSentence(t, c.range)}`
      : `The autopilot has no threshold for ${name}: its drafts always wait for an expert.`,
  ].join(" ");
  const head = ["Band", "Sent unchanged", "Edited", "Replaced", "Median edit"];
  if (t) head.push(`At or above ${t.min_confidence.toFixed(2)}`);
  const fig = figure(
    `chart-calibration-${c.channel}`,
    `Autopilot calibration on ${name}: what experts did with drafts, by confidence`,
    summary,
    table(
      `${name} drafts per confidence band`,
      head,
      c.bands.map((b) => {
        const row: (string | number)[] = [b.label, b.unchanged, b.edited, b.replaced, b.medianEdit === null ? "—" : `${b.medianEdit}% of the words`];
        if (t) row.push(bandAgainst(b, t));
        return row;
      }),
    ),
    (canvas) =>
      (chart = new Chart(canvas, {
        type: "bar",
        data: {
          labels: c.bands.map((b) => b.label),
          datasets: [
            { label: "Sent unchanged", data: c.bands.map((b) => b.unchanged), backgroundColor: COLOURS[0] },
            { label: "Edited", data: c.bands.map((b) => b.edited), backgroundColor: COLOURS[1] },
            { label: "Replaced", data: c.bands.map((b) => b.replaced), backgroundColor: COLOURS[2] },
          ],
        },
        options: {
          ...common,
          scales: {
            x: { stacked: true, title: { display: true, text: "agent's confidence" } },
            y: { stacked: true, beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "drafts" } },
          },
        },
        plugins: [thresholdLine(() => line)],
      })),
  );
  const preview = (value: number | null) => {
    line = value === null ? saved : { at: thresholdAt(value), label: `threshold ${value.toFixed(2)} (not saved)` };
    chart?.draw();
  };
  fig.querySelector(".chart-box")?.after(thresholdForm(c, name, form, preview));
  return fig;
}

/**
 * The channel's rule, set beside its chart: the threshold (the line follows what is typed,
 * so it is chosen against the bars), whether the channel sends itself, and the hold. The
 * save reads the policy again and changes only this channel's rule (and, turning it on,
 * the org's switch).
 */
function thresholdForm(c: ChannelCalibration, name: string, form: AutopilotForm, preview: (value: number | null) => void): HTMLElement {
  const channel = c.channel as Channel;
  const id = (what: string) => `autopilot-${what}-${c.channel}`;
  const rule = form.policy?.channels?.[channel] ?? null;
  const note = h("p", { class: "status-line", id: id("note"), role: "status" });
  const error = h("p", { class: "form-error", id: id("error"), role: "alert" });
  const threshold = h("input", {
    id: id("threshold"),
    type: "number",
    min: "0",
    max: "1",
    step: "0.01",
    required: true,
    value: (rule?.min_confidence ?? c.threshold?.min_confidence ?? 0.9).toFixed(2),
    "aria-describedby": id("note"),
    on: {
      input: () => {
        const v = thresholdValue(threshold.value);
        preview("value" in v ? v.value : null);
        note.textContent = "value" in v ? `The line shows ${v.value.toFixed(2)}; not saved yet.` : "";
      },
    },
  });
  const on = h("input", { id: id("on"), type: "checkbox", checked: rule?.enabled ?? false });
  const hold = h("input", { id: id("hold"), type: "number", min: "10", max: "3600", step: "1", required: true, value: String(rule?.hold_secs ?? 60) });
  const save = h("button", { type: "submit", text: "Save" });
  return h(
    "form",
    {
      class: "threshold-form",
      "aria-label": `The autopilot on ${name}`,
      novalidate: true,
      on: {
        submit: (e) => {
          e.preventDefault();
          const min = thresholdValue(threshold.value);
          const secs = holdValue(hold.value);
          threshold.setAttribute("aria-invalid", String("problem" in min));
          hold.setAttribute("aria-invalid", String("problem" in secs));
          if ("problem" in min || "problem" in secs) {
            error.textContent = ["problem" in min ? min.problem : "", "problem" in secs ? secs.problem : ""].filter(Boolean).join(" ");
            return;
          }
          error.textContent = "";
          save.disabled = true;
          note.textContent = "Saving…";
          void (async () => {
            try {
              const now = await autopilot.get(form.orgId);
              const next = await autopilot.set(form.orgId, withChannelRule(now, channel, { enabled: on.checked, min_confidence: min.value, hold_secs: secs.value }));
              const others = sendingChannels(next).filter((x) => x !== channel).map((x) => CHANNEL_LABEL[x] ?? x);
              form.saved(
                on.checked
                  ? `Saved: ${name} drafts at ${min.value.toFixed(2)} or above send themselves after ${secs.value} s unless an expert stops them.${others.length ? ` Also sending themselves: ${others.join(", ")}.` : ""}`
                  : `Saved: ${name} drafts wait for an expert; the threshold ${min.value.toFixed(2)} is kept for when it is turned on.`,
              );
            } catch (err) {
              note.textContent = "";
              error.textContent = `Could not save: ${err instanceof ApiError ? err.message : "the server did not answer"}.`;
            } finally {
              save.disabled = false;
            }
          })();
        },
      },
    },
    h("label", { for: id("threshold"), text: "Threshold" }),
    threshold,
    h("span", { class: "check" }, on, h("label", { for: id("on"), text: `${name} drafts send themselves` })),
    h("label", { for: id("hold"), text: "Hold (seconds)" }),
    hold,
    save,
    note,
    error,
  );
}

/** Seconds on the axis while every wait is under two minutes, else minutes. */
function waitUnit(p90: (number | null)[]): { name: string; of: (secs: number | null) => number | null } {
  const longest = Math.max(0, ...p90.filter((x): x is number => x !== null));
  if (longest < 120) return { name: "seconds", of: (s) => (s === null ? null : Math.round(s * 10) / 10) };
  return { name: "minutes", of: (s) => (s === null ? null : Math.round((s / 60) * 10) / 10) };
}

function median(values: (number | null)[]): number | null {
  const v = values.filter((x): x is number => x !== null).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

function scheduledReports(root: HTMLElement, orgId: string): void {
  const status = h("p", { role: "status", class: "status-line", text: "Loading the scheduled reports…" });
  const list = h("div", { class: "admin-list" });
  mount(root, h("h2", { id: "scheduled-title", text: "Scheduled reports" }), status, list);
  void (async () => {
    try {
      const page = await reports.list({ org_id: orgId, limit: 20 });
      status.textContent = page.items.length === 0 ? "No scheduled report yet: the daily summary is written after midnight in the org's time zone." : `${page.items.length}${page.next_cursor ? "+" : ""} latest reports`;
      if (page.items.length === 0) return;
      const num = (r: Schemas["ReportView"], key: string) => {
        const v = (r.data as Record<string, unknown>)[key];
        return typeof v === "number" ? v : "—";
      };
      mount(
        list,
        table(
          "Reports the scheduler wrote, newest first",
          ["Period", "Kind", "Messages in", "Messages out", "Releases", "Median first response", "Written"],
          page.items.map((r) => [
            `${r.period_start.slice(0, 10)} – ${r.period_end.slice(0, 10)} (${r.time_zone})`,
            r.kind.replace(/_/g, " "),
            num(r, "messages_in"),
            num(r, "messages_out"),
            num(r, "releases"),
            typeof (r.data as Record<string, unknown>).median_first_response_secs === "number"
              ? seconds((r.data as Record<string, number>).median_first_response_secs)
              : "—",
            clock(r.created_at),
          ]),
        ),
      );
    } catch (e) {
      status.textContent = problem(e, "the scheduled reports");
    }
  })();
}

function slaForm(orgId: string, current: number, changed: () => void): HTMLElement {
  const input = h("input", { id: "sla-minutes", type: "number", min: "1", max: "10080", step: "1", required: true, value: String(current) });
  const note = h("p", { class: "status-line", role: "status" });
  return h(
    "form",
    {
      class: "sla-form",
      "aria-label": "SLA",
      on: {
        submit: async (e) => {
          e.preventDefault();
          const minutes = Number(input.value);
          if (!Number.isInteger(minutes) || minutes < 1 || minutes > 10080) {
            note.textContent = "The SLA is a whole number of minutes from 1 to 10080 (a week).";
            return;
          }
          try {
            const s = await reports.updateSettings(orgId, { sla_minutes: minutes });
            note.textContent = `Saved: new items are due ${s.sla_minutes} minutes after the customer writes.`;
            changed();
          } catch (err) {
            note.textContent = `Could not save: ${(err as Error).message}`;
          }
        },
      },
    },
    h("label", { for: "sla-minutes", text: "SLA (minutes to answer a customer)" }),
    input,
    h("button", { type: "submit", text: "Save" }),
    note,
  );
}

export function reportsScreen(root: HTMLElement, orgId: string): void {
  clearCharts();
  const initial = defaultRange();
  const from = h("input", { id: "report-from", type: "date", value: initial.from, max: initial.to, required: true });
  const to = h("input", { id: "report-to", type: "date", value: initial.to, max: initial.to, required: true });
  const status = h("p", { role: "status", class: "status-line" });
  // Outside the charts, which a save draws again.
  const autopilotNote = h("p", { role: "status", class: "status-line", id: "autopilot-saved" });
  const rangeError = h("p", { class: "form-error", id: "report-range-error", role: "alert" });
  const body = h("div", { class: "report-charts", "aria-live": "off" });
  const settings = h("div", { class: "report-settings" });
  const scheduled = h("section", { class: "admin", "aria-labelledby": "scheduled-title" });

  let seq = 0;
  async function load(): Promise<void> {
    const problemText = rangeProblem(from.value, to.value);
    rangeError.textContent = problemText ?? "";
    from.setAttribute("aria-invalid", String(problemText !== null));
    to.setAttribute("aria-invalid", String(problemText !== null));
    if (problemText) return;
    const mine = ++seq;
    status.textContent = "Loading…";
    try {
      const [m, policy] = await Promise.all([
        reports.metrics({ org_id: orgId, from: from.value, to: to.value }),
        autopilot.get(orgId).catch(() => null),
      ]);
      if (mine !== seq) return;
      clearCharts();
      status.textContent = `${dayLabel(m.from)} to ${dayLabel(m.to)}, days in ${m.time_zone}.`;
      const saved = (message: string) => {
        autopilotNote.textContent = message;
        void load();
      };
      mount(body, charts_(m, { orgId, policy, saved }));
      mount(settings, slaForm(orgId, m.sla_minutes, () => void load()));
    } catch (e) {
      if (mine !== seq) return;
      clearCharts();
      mount(body);
      status.textContent = problem(e, "reports");
    }
  }

  const form = h(
    "form",
    {
      class: "report-range",
      "aria-label": "Date range",
      // The page's own messages (rangeProblem), not the browser's.
      novalidate: true,
      on: {
        submit: (e) => {
          e.preventDefault();
          autopilotNote.textContent = "";
          void load();
        },
      },
    },
    h("label", { for: "report-from", text: "From" }),
    from,
    h("label", { for: "report-to", text: "To" }),
    to,
    h("button", { type: "submit", class: "primary", text: "Show", "aria-describedby": "report-range-error" }),
    h("button", {
      type: "button",
      text: "Last 30 days",
      on: {
        click: () => {
          const r = lastDays(30);
          from.value = r.from;
          to.value = r.to;
          autopilotNote.textContent = "";
          void load();
        },
      },
    }),
    rangeError,
  );
  mount(
    root,
    h("section", { class: "admin reports", "aria-labelledby": "reports-title" }, h("h2", { id: "reports-title", text: "Reports" }), form, status, settings, autopilotNote, body),
    scheduled,
  );
  void load();
  scheduledReports(scheduled, orgId);
}
