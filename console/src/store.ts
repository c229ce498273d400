// Everything the console holds, in one place, kept current by realtime events:
//
// - the queue: every open item of the org (the "working set", fetched page by page in the
//   background after the first page is on screen). Filters, counts and the oldest waiting
//   time are computed here, so switching a filter is instant and the counts are exact.
//   Resolved items are not part of the working set; that tab reads its own pages, newest
//   first, as it scrolls.
// - the messages of the conversations on screen (opened by the detail pane, dropped when it
//   closes), with their delivery states.
//
// `apply` is the one place an event is routed; the views only read and subscribe.

import * as endpoints from "./endpoints";
import { type Filters, type StatusTab, matches, recentOrder, tabOf, waitingOrder } from "./filters";
import { ConversationNotes } from "./notes";
import type { Conversation, EventData, Item, Message, RealtimeEvent, Schemas } from "./types";

export { TABS, type Filters, type StatusTab } from "./filters";

const FIRST_PAGE = 50;
const PAGE = 200;
/** A conversation's messages are fetched this many at a time. */
export const MESSAGE_PAGE = 30;
/** The working set stops growing here; the list says so. */
export const WORKING_SET_CAP = 20_000;

type Listener = () => void;

/** What the store needs from the browser and the server; tests pass their own. */
export interface StoreDeps {
  queue: Pick<typeof endpoints.queue, "list" | "get">;
  conversations: Pick<typeof endpoints.conversations, "get">;
  /** Runs `fn` before the next paint (listeners run once per frame). */
  frame(fn: () => void): void;
  /** Runs `fn` in `ms`. */
  later(fn: () => void, ms: number): void;
}

const browser: StoreDeps = {
  queue: endpoints.queue,
  conversations: endpoints.conversations,
  frame: (fn) => requestAnimationFrame(fn),
  later: (fn, ms) => window.setTimeout(fn, ms),
};

/** A conversation on screen: its header, and its messages loaded so far. */
export interface OpenConversation {
  meta: Omit<Conversation, "messages" | "next_before" | "queue_item"> | null;
  messages: Map<string, Message>;
  /** The cursor for older messages; null on the oldest page (or before the first). */
  nextBefore: string | null;
  /** Counts changes, so a view can tell whether to draw the messages again. */
  revision: number;
}

/** An outbound message as an action answer or `agent_message_sent` carries it. */
type OutboundSummary = Pick<Schemas["MessageSummary"], "id" | "author" | "body" | "delivery_status" | "created_at">;

export class Store {
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
  private fetchScheduled = false;
  private generation = 0;
  private notifyQueued = false;
  private conversations = new Map<string, OpenConversation>();
  /** Internal notes of the conversations on screen (the detail pane tracks them). */
  readonly notes = new ConversationNotes();
  /** Counts delivery states set by events (see `deliverySetAt`). */
  private deliveryEvents = 0;
  /**
   * Per open conversation, per message: the `deliveryEvents` count when an event last set the
   * message's delivery state. A page of messages asked for before that (a `message_created`
   * asks for the newest page, and the `message_status_updated` that follows at once can
   * overtake it) must not put the older state back: no later event would correct it.
   */
  private deliverySetAt = new Map<string, Map<string, number>>();

  constructor(
    readonly orgId: string,
    readonly me: string,
    private readonly deps: StoreDeps = browser,
  ) {}

  subscribe(fn: Listener): () => void {
    this.listeners.push(fn);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== fn);
    };
  }

  /** Listeners run once per frame however many changes arrived. */
  private changed(items = true): void {
    if (items) this.cache = null;
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    this.deps.frame(() => {
      this.notifyQueued = false;
      for (const fn of this.listeners) fn();
    });
  }

  /** One realtime event, in `seq` order: the only place events are routed. */
  apply(e: RealtimeEvent): void {
    switch (e.event) {
      case "queue_item_created":
      case "queue_item_updated":
        this.applyItemEvent(e.data);
        return;
      case "message_created":
        this.refetchConversationItem(e.data.conversation_id);
        if (this.conversations.has(e.data.conversation_id)) void this.refreshNewest(e.data.conversation_id);
        return;
      case "agent_message_sent":
        this.refetchConversationItem(e.data.conversation_id);
        this.putOutbound(e.data.conversation_id, e.data.message);
        return;
      case "message_status_updated":
        this.refetchConversationItem(e.data.conversation_id);
        this.applyDelivery(e.data);
        return;
      case "report_ready":
        return;
      case "note_added": {
        const c = this.conversations.get(e.data.conversation_id);
        if (this.notes.add(e.data) && c) this.touched(c);
        return;
      }
      case "conversation_erased":
        this.forgetConversation(e.data.conversation_id);
        return;
      default:
        exhaustive(e);
    }
  }

  // --- the queue ---------------------------------------------------------------------------

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
    const first = await this.deps.queue.list({ org_id: this.orgId, order: "waiting", limit: FIRST_PAGE });
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
        const page = await this.deps.queue.list({ org_id: this.orgId, order: "waiting", limit: PAGE, cursor });
        if (generation !== this.generation) return;
        for (const item of page.items) {
          // An event may already have brought a newer version.
          const known = this.open.get(item.id);
          if (!known || known.version <= item.version) this.open.set(item.id, item);
        }
        cursor = page.next_cursor ?? null;
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
    try {
      const page = await this.deps.queue.list({
        org_id: this.orgId,
        status: "resolved",
        order: "recent",
        limit: 100,
        cursor: this.resolvedCursor ?? undefined,
      });
      for (const item of page.items) this.resolved.set(item.id, item);
      this.resolvedCursor = page.next_cursor ?? null;
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

  /** The rows of the current filter, in order. */
  rows(): Item[] {
    if (this.cache) return this.cache;
    const status = this.filters.status;
    const source = status === "resolved" ? this.resolved.values() : this.open.values();
    const rows: Item[] = [];
    for (const item of source) if (matches(item, this.filters, status, this.me)) rows.push(item);
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
      if (!matches(item, this.filters, null, this.me)) continue;
      counts.open++;
      if (item.status !== "resolved") counts[tabOf(item.status)]++;
    }
    for (const item of this.resolved.values()) if (matches(item, this.filters, null, this.me)) counts.resolved++;
    return counts;
  }

  /** The creation time of the longest-waiting pending item that matches the filters. */
  oldestPending(): string | null {
    let oldest: string | null = null;
    for (const item of this.open.values()) {
      if ((item.status === "pending" || item.status === "auto_pending") && matches(item, this.filters, null, this.me) && (!oldest || item.created_at < oldest)) {
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

  /** The item, from the store or else from the server. */
  async fetchItem(id: string): Promise<Item> {
    const known = this.get(id);
    if (known) return known;
    const item = await this.deps.queue.get(id);
    this.upsert(item);
    return item;
  }

  /** A queue event: patch what it says at once, fetch the full row (draft, preview) soon. */
  private applyItemEvent(data: EventData<"queue_item_updated">): void {
    const id = String(data.id);
    const known = this.get(id);
    const version = Number(data.version);
    if (known && Number.isFinite(version) && version > known.version) {
      this.upsert({
        ...known,
        status: data.status,
        version,
        claimed_by: data.claimed_by ?? null,
        flagged: Boolean(data.flagged_for_review ?? known.flagged),
      });
    }
    this.refetch(id);
  }

  /** A message in a conversation changes its item's preview. */
  private refetchConversationItem(conversationId: string): void {
    const item = this.byConversation(conversationId);
    if (item) this.refetch(item.id);
  }

  refetch(id: string): void {
    this.pendingFetch.add(id);
    if (this.fetchScheduled) return;
    this.fetchScheduled = true;
    this.deps.later(() => void this.flushFetches(), 30);
  }

  private async flushFetches(): Promise<void> {
    this.fetchScheduled = false;
    const ids = [...this.pendingFetch];
    this.pendingFetch.clear();
    const generation = this.generation;
    const worker = async () => {
      for (let id = ids.shift(); id; id = ids.shift()) {
        try {
          const item = await this.deps.queue.get(id);
          if (generation === this.generation) this.upsert(item);
        } catch (e) {
          const status = (e as { status?: number }).status;
          if (status === 404 || status === 403) this.remove(id);
          else this.pendingFetch.add(id);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(6, ids.length) }, worker));
    if (this.pendingFetch.size > 0 && !this.fetchScheduled) {
      this.fetchScheduled = true;
      this.deps.later(() => void this.flushFetches(), 1000);
    }
  }

  // --- the conversations on screen ---------------------------------------------------------

  /** Starts keeping a conversation's messages (events for it are applied from now on). */
  openConversation(id: string): OpenConversation {
    let c = this.conversations.get(id);
    if (!c) {
      c = { meta: null, messages: new Map(), nextBefore: null, revision: 0 };
      this.conversations.set(id, c);
    }
    return c;
  }

  /**
   * The customer was erased: the conversation's items, messages and notes go from every
   * view, and a pending refetch of its item finds nothing to bring back.
   */
  private forgetConversation(id: string): void {
    for (const items of [this.open, this.resolved]) {
      for (const [itemId, item] of items) if (item.conversation_id === id) items.delete(itemId);
    }
    const c = this.conversations.get(id);
    if (c) {
      c.messages.clear();
      c.meta = null;
      this.touched(c);
    }
    this.closeConversation(id);
    this.notes.untrack(id);
    this.changed();
  }

  /** Forgets a conversation's messages: nothing shows them any more. */
  closeConversation(id: string): void {
    this.conversations.delete(id);
    this.deliverySetAt.delete(id);
  }

  conversation(id: string): OpenConversation | undefined {
    return this.conversations.get(id);
  }

  /** The messages loaded so far, oldest first. */
  messages(id: string): Message[] {
    const c = this.conversations.get(id);
    if (!c) return [];
    return [...c.messages.values()].sort((a, b) =>
      a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1,
    );
  }

  private touched(c: OpenConversation): void {
    c.revision++;
    this.changed(false);
  }

  /** Takes a page of `id`'s messages asked for when `deliveryEvents` was `asOf`. */
  private merge(id: string, c: OpenConversation, page: Message[], asOf: number): void {
    const setAt = this.deliverySetAt.get(id);
    for (const m of page) {
      const known = c.messages.get(m.id);
      const byEvent = known && (setAt?.get(m.id) ?? -1) > asOf;
      c.messages.set(m.id, byEvent ? { ...m, delivery: known.delivery } : m);
    }
  }

  /** The conversation's header and newest page (throws what the request threw). */
  async loadConversation(id: string): Promise<void> {
    const asOf = this.deliveryEvents;
    const answer = await this.deps.conversations.get(id, { limit: MESSAGE_PAGE });
    const c = this.conversations.get(id);
    if (!c) return; // closed meanwhile
    const { messages: page, next_before, queue_item, ...meta } = answer;
    c.meta = meta;
    this.merge(id, c, page, asOf);
    // Only when no event brought messages first: the cursor must be the oldest loaded.
    if (c.nextBefore === null && c.messages.size === page.length) c.nextBefore = next_before ?? null;
    if (queue_item) this.upsert(queue_item);
    this.touched(c);
  }

  /** The newest page again, after an event said something changed (errors: the next event or a reload brings it). */
  async refreshNewest(id: string): Promise<void> {
    try {
      const asOf = this.deliveryEvents;
      const answer = await this.deps.conversations.get(id, { limit: MESSAGE_PAGE });
      const c = this.conversations.get(id);
      if (!c) return;
      this.merge(id, c, answer.messages, asOf);
      this.touched(c);
    } catch {
      // The next event or a reload will bring it.
    }
  }

  /** The page before the oldest loaded; false when there is none (throws what the request threw). */
  async loadOlder(id: string): Promise<boolean> {
    const before = this.conversations.get(id)?.nextBefore;
    if (!before) return false;
    const asOf = this.deliveryEvents;
    const answer = await this.deps.conversations.get(id, { limit: MESSAGE_PAGE, before });
    const c = this.conversations.get(id);
    if (!c) return false;
    this.merge(id, c, answer.messages, asOf);
    c.nextBefore = answer.next_before ?? null;
    this.touched(c);
    return true;
  }

  /**
   * An outbound message that was just queued (an action's answer, `agent_message_sent`).
   * A delivery state already known is kept: a status event may have overtaken it.
   */
  putOutbound(conversationId: string, m: OutboundSummary, authorUserId?: string): void {
    const c = this.conversations.get(conversationId);
    if (!c) return;
    const known = c.messages.get(m.id);
    c.messages.set(m.id, {
      id: m.id,
      direction: "outbound",
      author: m.author,
      author_user_id: authorUserId ?? known?.author_user_id ?? null,
      body: m.body,
      created_at: m.created_at,
      delivery: known?.delivery ?? {
        status: m.delivery_status ?? "queued",
        provider_message_id: null,
        delivered_at: null,
        error: null,
      },
    });
    this.touched(c);
  }

  private applyDelivery(data: EventData<"message_status_updated">): void {
    const c = this.conversations.get(data.conversation_id);
    if (!c) return;
    const known = c.messages.get(data.message_id);
    if (!known) {
      void this.refreshNewest(data.conversation_id);
      return;
    }
    known.delivery = {
      provider_message_id: null,
      delivered_at: null,
      ...known.delivery,
      status: data.delivery_status,
      error: data.error ?? null,
    };
    let setAt = this.deliverySetAt.get(data.conversation_id);
    if (!setAt) this.deliverySetAt.set(data.conversation_id, (setAt = new Map()));
    setAt.set(data.message_id, ++this.deliveryEvents);
    this.touched(c);
  }
}

function exhaustive(_event: never): void {}
