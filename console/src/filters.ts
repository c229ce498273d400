// The queue's tabs and filters, and the orders its lists are shown in: pure functions of an
// item, so the store can count and sort the whole working set on every change.

import type { Channel, Item, QueueStatus } from "./types";

export type StatusTab = "pending" | "claimed" | "awaiting_client" | "snoozed" | "open" | "resolved";

export const TABS: { id: StatusTab; label: string }[] = [
  { id: "pending", label: "Pending" },
  { id: "claimed", label: "Claimed" },
  { id: "awaiting_client", label: "Awaiting customer" },
  { id: "snoozed", label: "Snoozed" },
  { id: "open", label: "All open" },
  { id: "resolved", label: "Resolved" },
];

/** The tab an item's state is listed under: an item on the autopilot's hold is pending (an
 * expert may still stop it or act on it). */
export function tabOf(status: Exclude<QueueStatus, "resolved">): Exclude<StatusTab, "open" | "resolved"> {
  return status === "auto_pending" ? "pending" : status;
}

export interface Filters {
  status: StatusTab;
  channel: Channel | "";
  flagged: boolean;
  mine: boolean;
  search: string;
}

/** Longest waiting first. */
export function waitingOrder(a: Item, b: Item): number {
  return a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1;
}

/** Newest activity first. */
export function recentOrder(a: Item, b: Item): number {
  return a.updated_at > b.updated_at ? -1 : a.updated_at < b.updated_at ? 1 : a.id < b.id ? -1 : 1;
}

/** Whether `item` passes the filters; `status` null ignores the status tab (for counts). */
export function matches(item: Item, f: Filters, status: StatusTab | null, me: string): boolean {
  if (status && status !== "open" && status !== "resolved" && (item.status === "resolved" || tabOf(item.status) !== status)) return false;
  if (f.channel && item.channel !== f.channel) return false;
  if (f.flagged && !item.flagged) return false;
  if (f.mine && item.claimed_by !== me) return false;
  if (f.search) {
    const q = f.search.toLowerCase();
    const hay = `${item.customer.display_name ?? ""} ${item.customer.external_id} ${item.last_message?.preview ?? ""}`;
    if (!hay.toLowerCase().includes(q)) return false;
  }
  return true;
}
