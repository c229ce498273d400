// A message's journey as the console reads it: one line per step of its exchange (the
// customer's message and the reply answering it), from GET
// /conversations/{id}/messages/{message_id}/journey, e.g. "10:02:03 received",
// "10:02:05 drafted (1.8 s)", "10:39:51 released by Ada", "10:39:52 delivered". The
// server's steps carry no customer text, so nothing here can show any.

import type { Schemas } from "./types";

export type JourneyStep = Schemas["StepView"];

/** A step's detail, whose fields depend on the step (see the server's `StepView`). */
type Detail = Record<string, unknown>;

/** Seconds with one decimal under a minute, else minutes and seconds: "1.8 s", "2 min 5 s". */
export function seconds(ms: number): string {
  if (ms < 60_000) return `${(Math.round(ms / 100) / 10).toFixed(1)} s`;
  const total = Math.round(ms / 1000);
  const min = Math.floor(total / 60);
  const s = total % 60;
  return s ? `${min} min ${s} s` : `${min} min`;
}

/** "10:02:03" in the viewer's time zone (`zone` pins one, for tests). */
export function stepClock(iso: string, zone?: string): string {
  return new Date(iso).toLocaleTimeString("en-GB", {
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hour12: false,
    timeZone: zone,
  });
}

function str(d: Detail, key: string): string | null {
  const v = d[key];
  return typeof v === "string" && v ? v : null;
}

/** What happened at a step, in words: "drafted (1.8 s)", "released by Ada", "attempt 2: HTTP 500". */
export function stepLabel(step: JourneyStep): string {
  const d = (step.detail ?? {}) as Detail;
  switch (step.step) {
    case "received":
      return "received";
    case "committed":
      return "committed";
    case "queued": {
      const attempt = Number(d.attempt ?? 1);
      return attempt > 1 ? `queued (attempt ${attempt})` : "queued";
    }
    case "drafted": {
      const parts = [typeof d.agent_ms === "number" ? seconds(d.agent_ms) : null, d.fallback ? "fallback" : null];
      const said = parts.filter(Boolean).join(", ");
      return said ? `drafted (${said})` : "drafted";
    }
    case "shown":
      return d.status === "auto_pending" ? "shown, held by the autopilot" : "shown to experts";
    case "claimed":
      return `claimed by ${str(d, "name") ?? "an expert"}`;
    case "released": {
      const who = d.by === "autopilot" ? `the autopilot (${str(d, "rule") ?? "rule"})` : (str(d, "name") ?? "an expert");
      const made = d.reply === "edited" ? ", edited" : d.reply === "own" ? ", own reply" : "";
      return `released by ${who}${made}`;
    }
    case "attempt": {
      const n = Number(d.attempt ?? 0);
      const outcome =
        d.outcome === "accepted"
          ? "accepted"
          : typeof d.status === "number"
            ? `HTTP ${d.status}`
            : (str(d, "error_class") ?? String(d.outcome ?? "failed"));
      return `attempt ${n}: ${outcome}`;
    }
    case "delivered":
      return "delivered";
    case "dead_lettered":
      return d.dead ? "dead" : "dead-lettered";
  }
  return String(step.step);
}

/** One step's line: its time and what happened. */
export function journeyLine(step: JourneyStep, zone?: string): string {
  return `${stepClock(step.at, zone)} ${stepLabel(step)}`;
}

/** The whole journey on one line, as an expert would read it out. */
export function journeySummary(steps: JourneyStep[], zone?: string): string {
  return steps.map((s) => journeyLine(s, zone)).join(" · ");
}
