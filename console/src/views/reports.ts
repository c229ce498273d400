// `#/reports`, for an org's admins: charts of the org's activity over a range of days
// (messages per channel, time to first reply, SLA met, what replies were made of, releases
// per expert), the org's SLA setting, and the reports the scheduler wrote.
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
  PointElement,
  Tooltip,
} from "chart.js";
import { ApiError } from "../api";
import { h, mount } from "../dom";
import { reports } from "../endpoints";
import { CHANNEL_LABEL, clock } from "../format";
import {
  type Metrics,
  REPLY_LABEL,
  calibrationBars,
  dayLabel,
  daysBetween,
  defaultRange,
  expertReleases,
  firstReply,
  messagesPerChannel,
  rangeProblem,
  replyShares,
  seconds,
  slaMet,
  thresholdSentences,
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

function charts_(m: Metrics): HTMLElement[] {
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
  const bars = calibrationBars(m);
  const sentences = thresholdSentences(m);
  const calibrationFig = figure(
    "chart-calibration",
    "Autopilot calibration: what experts did with drafts, by confidence",
    [bars.length === 0 ? "No draft was released or replaced in this range." : `${bars.length} confidence bands with drafts.`, ...sentences].join(" "),
    table(
      "Drafts per confidence band",
      ["Band", "Sent unchanged", "Edited", "Replaced", "Median edit"],
      bars.map((b) => [b.label, b.unchanged, b.edited, b.replaced, b.medianEdit === null ? "—" : `${b.medianEdit}% of the words`]),
    ),
    (canvas) =>
      bars.length === 0
        ? null
        : new Chart(canvas, {
            type: "bar",
            data: {
              labels: bars.map((b) => b.label),
              datasets: [
                { label: "Sent unchanged", data: bars.map((b) => b.unchanged), backgroundColor: COLOURS[0] },
                { label: "Edited", data: bars.map((b) => b.edited), backgroundColor: COLOURS[1] },
                { label: "Replaced", data: bars.map((b) => b.replaced), backgroundColor: COLOURS[2] },
              ],
            },
            options: { ...common, scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } } } },
          }),
  );
  return [messages, firstReplyFig, slaFig, sharesFig, expertsFig, calibrationFig];
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
      const m = await reports.metrics({ org_id: orgId, from: from.value, to: to.value });
      if (mine !== seq) return;
      clearCharts();
      status.textContent = `${dayLabel(m.from)} to ${dayLabel(m.to)}, days in ${m.time_zone}.`;
      mount(body, charts_(m));
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
          void load();
        },
      },
    },
    h("label", { for: "report-from", text: "From" }),
    from,
    h("label", { for: "report-to", text: "To" }),
    to,
    h("button", { type: "submit", class: "primary", text: "Show", "aria-describedby": "report-range-error" }),
    rangeError,
  );
  mount(
    root,
    h("section", { class: "admin reports", "aria-labelledby": "reports-title" }, h("h2", { id: "reports-title", text: "Reports" }), form, status, settings, body),
    scheduled,
  );
  void load();
  scheduledReports(scheduled, orgId);
}
