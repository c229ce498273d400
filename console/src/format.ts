// How times, channels and states read on screen.

import type { Channel, QueueStatus } from "./types";

export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "";
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return s < 45 ? "just now" : duration(s * 1000);
}

/** A length of time, coarse: "3 min", "2 h 5 min", "1 d 4 h". */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return "<1 min";
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return `${d} d ${h % 24} h`;
}

export function clock(iso: string | null | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return sameDay
    ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

export const CHANNEL_LABEL: Record<Channel, string> = {
  slack: "Slack",
  whatsapp: "WhatsApp",
  telegram: "Telegram",
  email: "Email",
};

export const STATUS_LABEL: Record<QueueStatus, string> = {
  pending: "Pending",
  auto_pending: "Sending soon",
  claimed: "Claimed",
  awaiting_client: "Awaiting customer",
  snoozed: "Snoozed",
  resolved: "Resolved",
};

export const DELIVERY_LABEL: Record<string, string> = {
  queued: "queued",
  retry: "retrying",
  sent: "sent",
  failed: "failed",
  dead: "dead",
};

export function shortId(id: string | null | undefined): string {
  return id ? id.slice(0, 8) : "";
}

export function percent(x: number | null | undefined): string {
  return x === null || x === undefined ? "n/a" : `${Math.round(x * 100)}%`;
}

/** A `datetime-local` value (local time, minutes) for a Date. */
export function localInput(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The countdown of an item on the autopilot's hold: "sends itself in 0:42". */
export function sendsIn(sendAt: string, now = Date.now()): string {
  const left = Math.ceil((Date.parse(sendAt) - now) / 1000);
  if (!(left > 0)) return "sending now";
  const m = Math.floor(left / 60);
  const s = left % 60;
  return `sends itself in ${m}:${String(s).padStart(2, "0")}`;
}
