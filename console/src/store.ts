// The queue as the console holds it: every open item of the org (the "working set",
// fetched page by page in the background after the first page is on screen), kept current
// by realtime events. Filters, counts and the oldest waiting time are computed here, so
// switching a filter is instant and the counts are exact. Resolved items are not part of
// the working set; that tab reads its own pages, newest first, as it scrolls.

import { api } from "./api";
import type { Channel, Item, Page, QueueStatus } from "./types";

export type StatusTab = "pending" | "claimed" | "awaiting_client" | "snoozed" | "open" | "resolved";

export const TABS: { id: StatusTab; label: string }[] = [
  { id: "pending", label: "Pending" },
  { id: "claimed", label: "Claimed" },
  { id: "awaiting_client", label: "Awaiting customer" },
  { id: "snoozed", label: "Snoozed" },
  { id: "open", label: "All open" },
  { id: "resolved", label: "Resolved" },
];

export interface Filters {
  status: StatusTab;
  channel: Channel | "";
  flagged: boolean;
  mine: boolean;
  search: string;
}

const FIRST_PAGE = 50;
const PAGE = 200;
/** The working set stops growing here; the list says so. */
export const WORKING_SET_CAP = 20_000;

type Listener = () => void;

function waitingOrder(a: Item, b: Item): number {
  return a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1;
}

function recentOrder(a: Item, b: Item): number {
  return a.updated_at > b.updated_at ? -1 : a.updated_at < b.updated_at ? 1 : a.id < b.id ? -1 : 1;
}

export class QueueStore {
  readonly open = new Map<string, Item>();
  private resolved = new Map<string, Item>();
  private resolvedCursor: string | null = null;
  private resolvedStarted = false;
  private resolvedLoading = false;
  /** All pages of the working set are in. */
  complete = false;
  capped = false;
  error: string | null = null;
  filters: Filters = { status: "pending", channel: "", flagged: false, mine: false, search: "" };
  private listeners: Listener[] = [];
  private cache: Item[] | null = null;
  private pendingFetch = new Set<string>();
  private fetchTimer: number | undefined;
  private generation = 0;
  private notifyQueued = false;

  constructor(
    readonly orgId: string,
    readonly me: string,
  ) {}

  subscribe(fn: Listener): () => void {
    this.listeners.push(fn);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== fn);
    };
  }

  /** Listeners run once per animation frame however many changes arrived. */
  private changed(): void {
    this.cache = null;
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    requestAnimationFrame(() => {
      this.notifyQueued = false;
      for (const fn of this.listeners) fn();
    });
  }

  setFilters(patch: Partial<Filters>): void {
    this.filters = { ...this.filters, ...patch };
    if (this.filters.status === "resolved" && !this.resolvedStarted) void this.loadResolved();
    this.changed();
  }

  get(id: string): Item | undefined {
    return this.open.get(id) ?? this.resolved.get(id);
  }

  byConversation(conversationId: string): Item | undefined {
    for (const item of this.open.values()) if (item.conversation_id === conversationId) return item;
    for (const item of this.resolved.values()) if (item.conversation_id === conversationId) return item;
    return undefined;
  }

  /** Loads the working set: resolves once the first page is in, the rest follows. */
  async load(): Promise<void> {
    const generation = ++this.generation;
    this.open.clear();
    this.complete = false;
    this.capped = false;
    this.error = null;
    // A small first page puts rows on screen at once; larger pages follow in the background.
    const first = await api<Page<Item>>("GET", `/expert-queue?org_id=${this.orgId}&order=waiting&limit=${FIRST_PAGE}`);
    for (const item of first.items) this.open.set(item.id, item);
    this.changed();
    if (!first.next_cursor) {
      this.complete = true;
      return;
    }
    void this.loadRest(first.next_cursor, generation);
  }

  private async loadRest(cursor: string | null, generation: number): Promise<void> {
    try {
      while (cursor && generation === this.generation) {
        const page: Page<Item> = await api<Page<Item>>(
          "GET",
          `/expert-queue?org_id=${this.orgId}&order=waiting&limit=${PAGE}&cursor=${encodeURIComponent(cursor)}`,
        );
        if (generation !== this.generation) return;
        for (const item of page.items) {
          // An event may already have brought a newer version.
          const known = this.open.get(item.id);
          if (!known || known.version <= item.version) this.open.set(item.id, item);
        }
        cursor = page.next_cursor;
        if (this.open.size >= WORKING_SET_CAP && cursor) {
          this.capped = true;
          break;
        }
        this.changed();
      }
      this.complete = true;
    } catch (e) {
      this.error = `Could not load the whole queue: ${(e as Error).message}`;
    }
    this.changed();
  }

  private async loadResolved(): Promise<void> {
    if (this.resolvedLoading || (this.resolvedStarted && !this.resolvedCursor)) return;
    this.resolvedLoading = true;
    const cursor = this.resolvedCursor ? `&cursor=${encodeURIComponent(this.resolvedCursor)}` : "";
    try {
      const page = await api<Page<Item>>(
        "GET",
        `/expert-queue?org_id=${this.orgId}&status=resolved&order=recent&limit=100${cursor}`,
      );
      for (const item of page.items) this.resolved.set(item.id, item);
      this.resolvedCursor = page.next_cursor;
      this.resolvedStarted = true;
    } catch (e) {
      this.error = `Could not load resolved items: ${(e as Error).message}`;
    } finally {
      this.resolvedLoading = false;
      this.changed();
    }
  }

  /** The list asks for more when it is scrolled near its end. */
  loadMore(): void {
    if (this.filters.status === "resolved") void this.loadResolved();
  }

  get hasMore(): boolean {
    return this.filters.status === "resolved" ? !this.resolvedStarted || !!this.resolvedCursor : !this.complete;
  }

  private matches(item: Item, status: StatusTab | null): boolean {
    const f = this.filters;
    if (status && status !== "open" && status !== "resolved" && item.status !== status) return false;
    if (f.channel && item.channel !== f.channel) return false;
    if (f.flagged && !item.flagged) return false;
    if (f.mine && item.claimed_by !== this.me) return false;
    if (f.search) {
      const q = f.search.toLowerCase();
      const hay = `${item.customer.display_name ?? ""} ${item.customer.external_id} ${item.last_message?.preview ?? ""}`;
      if (!hay.toLowerCase().includes(q)) return false;
    }
    return true;
  }

  /** The rows of the current filter, in order. */
  rows(): Item[] {
    if (this.cache) return this.cache;
    const status = this.filters.status;
    const source = status === "resolved" ? this.resolved.values() : this.open.values();
    const rows: Item[] = [];
    for (const item of source) if (this.matches(item, status)) rows.push(item);
    rows.sort(status === "resolved" ? recentOrder : waitingOrder);
    this.cache = rows;
    return rows;
  }

  /** Per tab, the items that match the other filters (resolved: loaded so far). */
  counts(): Record<StatusTab, number> {
    const counts: Record<StatusTab, number> = {
      pending: 0,
      claimed: 0,
      awaiting_client: 0,
      snoozed: 0,
      open: 0,
      resolved: 0,
    };
    for (const item of this.open.values()) {
      if (!this.matches(item, null)) continue;
      counts.open++;
      if (item.status !== "resolved") counts[item.status]++;
    }
    for (const item of this.resolved.values()) if (this.matches(item, null)) counts.resolved++;
    return counts;
  }

  /** The creation time of the longest-waiting pending item that matches the filters. */
  oldestPending(): string | null {
    let oldest: string | null = null;
    for (const item of this.open.values()) {
      if (item.status === "pending" && this.matches(item, null) && (!oldest || item.created_at < oldest)) {
        oldest = item.created_at;
      }
    }
    return oldest;
  }

  /** Takes an item as an answer or a fetch returned it (newer versions win). */
  upsert(item: Item): void {
    const known = this.get(item.id);
    if (known && known.version > item.version) return;
    if (item.status === "resolved") {
      this.open.delete(item.id);
      if (this.resolvedStarted) this.resolved.set(item.id, item);
    } else {
      this.resolved.delete(item.id);
      this.open.set(item.id, item);
    }
    this.changed();
  }

  remove(id: string): void {
    if (this.open.delete(id) || this.resolved.delete(id)) this.changed();
  }

  /** A queue event: patch what it says at once, fetch the full row (draft, preview) soon. */
  applyItemEvent(data: Record<string, unknown>): void {
    const id = String(data.id);
    const known = this.get(id);
    const version = Number(data.version);
    if (known && Number.isFinite(version) && version > known.version) {
      this.upsert({
        ...known,
        status: data.status as QueueStatus,
        version,
        claimed_by: (data.claimed_by as string | null) ?? null,
        flagged: Boolean(data.flagged_for_review ?? known.flagged),
      });
    }
    this.refetch(id);
  }

  /** A message in a conversation changes its item's preview. */
  applyMessageEvent(conversationId: string): void {
    const item = this.byConversation(conversationId);
    if (item) this.refetch(item.id);
  }

  refetch(id: string): void {
    this.pendingFetch.add(id);
    if (this.fetchTimer !== undefined) return;
    this.fetchTimer = window.setTimeout(() => void this.flushFetches(), 30);
  }

  private async flushFetches(): Promise<void> {
    this.fetchTimer = undefined;
    const ids = [...this.pendingFetch];
    this.pendingFetch.clear();
    const generation = this.generation;
    const worker = async () => {
      for (let id = ids.shift(); id; id = ids.shift()) {
        try {
          const item = await api<Item>("GET", `/expert-queue/${id}`);
          if (generation === this.generation) this.upsert(item);
        } catch (e) {
          const status = (e as { status?: number }).status;
          if (status === 404 || status === 403) this.remove(id);
          else this.pendingFetch.add(id);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(6, ids.length) }, worker));
    if (this.pendingFetch.size > 0 && this.fetchTimer === undefined) {
      this.fetchTimer = window.setTimeout(() => void this.flushFetches(), 1000);
    }
  }
}
