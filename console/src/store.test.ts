// The store: the working set as pages and events shape it, the filters and counts, and the
// messages of an open conversation as events change them.

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "./api";
import { MESSAGE_PAGE, Store, type StoreDeps } from "./store";
import type { Conversation, EventData, EventName, Item, Message, RealtimeEvent } from "./types";

const ORG = "11111111-1111-1111-1111-111111111111";
const ME = "99999999-9999-9999-9999-999999999999";
const OTHER = "88888888-8888-8888-8888-888888888888";

type QueueQuery = Parameters<StoreDeps["queue"]["list"]>[0];
type MessagesQuery = Parameters<StoreDeps["conversations"]["get"]>[1];

function item(id: string, over: Partial<Item> = {}): Item {
  return {
    id,
    org_id: ORG,
    status: "pending",
    version: 1,
    channel: "slack",
    conversation_id: `conv-${id}`,
    customer: { id: `cust-${id}`, display_name: `Customer ${id}`, external_id: `ext-${id}` },
    last_message: { preview: `hello from ${id}`, at: "2024-05-01T10:00:00Z" },
    draft: null,
    flagged: false,
    claimed_by: null,
    snoozed_until: null,
    sla_due_at: null,
    created_at: "2024-05-01T10:00:00Z",
    updated_at: "2024-05-01T10:00:00Z",
    ...over,
  };
}

function message(id: string, at: string, over: Partial<Message> = {}): Message {
  return {
    id,
    direction: "inbound",
    author: "customer",
    author_user_id: null,
    body: `text ${id}`,
    created_at: at,
    delivery: null,
    ...over,
  };
}

/** An event as the socket delivers it (the number does not matter to the store). */
function ev<K extends EventName>(event: K, data: Omit<EventData<K>, "org_id" | "seq">): RealtimeEvent {
  return { event, data: { ...data, org_id: ORG, seq: 1 } } as unknown as RealtimeEvent;
}

/** A server holding `items`, and a store reading it; listeners run at once. */
function setup(items: Item[] = []) {
  const server = new Map(items.map((i) => [i.id, i]));
  const pages: string[] = [];
  const conversations = new Map<string, Message[]>();
  const deps: StoreDeps = {
    queue: {
      list: vi.fn(async (q: QueueQuery) => {
        const all = [...server.values()].filter((i) => (q.status === "resolved" ? i.status === "resolved" : i.status !== "resolved"));
        const from = q.cursor ? Number(q.cursor) : 0;
        const limit = q.limit ?? 50;
        pages.push(`${q.status ?? "open"}:${from}+${limit}`);
        if (from > 0) await new Promise((r) => setTimeout(r, 10)); // later pages take a while
        const next = from + limit < all.length ? String(from + limit) : null;
        return { items: all.slice(from, from + limit), next_cursor: next };
      }),
      get: vi.fn(async (id: string) => {
        const found = server.get(id);
        if (!found) throw new ApiError(404, "not_found", "item not found");
        return found;
      }),
    },
    conversations: {
      get: vi.fn(async (id: string, q: MessagesQuery): Promise<Conversation> => {
        const all = [...(conversations.get(id) ?? [])].sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
        const start = q.before ? all.findIndex((m) => m.id === q.before) + 1 : 0;
        const limit = q.limit ?? MESSAGE_PAGE;
        const page = all.slice(start, start + limit);
        return {
          id,
          org_id: ORG,
          channel: "slack",
          connection_id: "conn",
          status: "open",
          customer: { id: "cust", display_name: "Ada", external_id: "U1" },
          created_at: "2024-05-01T10:00:00Z",
          updated_at: "2024-05-01T10:00:00Z",
          queue_item: [...server.values()].find((i) => i.conversation_id === id) ?? null,
          messages: page,
          next_before: start + limit < all.length ? (page.at(-1)?.id ?? null) : null,
        };
      }),
    },
    frame: (fn) => fn(),
    later: (fn, ms) => void setTimeout(fn, ms),
  };
  const store = new Store(ORG, ME, deps);
  return { store, deps, server, pages, conversations };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

const settle = () => vi.advanceTimersByTimeAsync(0);

describe("the working set", () => {
  it("shows the first page at once and loads the rest in the background", async () => {
    const many = Array.from({ length: 260 }, (_, i) => item(`i${String(i).padStart(3, "0")}`));
    const t = setup(many);
    await t.store.load();
    expect(t.store.open.size).toBe(50);
    expect(t.store.complete).toBe(false);
    await vi.advanceTimersByTimeAsync(20);
    expect(t.store.open.size).toBe(260);
    expect(t.store.complete).toBe(true);
    expect(t.pages).toEqual(["open:0+50", "open:50+200", "open:250+200"]);
  });

  it("keeps the newer version when a page and an event disagree", async () => {
    const t = setup(Array.from({ length: 60 }, (_, i) => item(`i${i}`)));
    await t.store.load();
    // An event brought version 3 of an item the background page still holds at version 1.
    t.store.upsert(item("i55", { version: 3, status: "claimed", claimed_by: OTHER }));
    await vi.advanceTimersByTimeAsync(10);
    expect(t.store.complete).toBe(true);
    expect(t.store.get("i55")?.version).toBe(3);
  });

  it("ignores an older version and moves a resolved item out of the open set", async () => {
    const t = setup([item("a", { version: 2 })]);
    await t.store.load();
    t.store.upsert(item("a", { version: 1, status: "claimed" }));
    expect(t.store.get("a")?.status).toBe("pending");
    t.store.upsert(item("a", { version: 3, status: "resolved" }));
    expect(t.store.open.has("a")).toBe(false);
  });

  it("filters, counts and orders the rows", async () => {
    const t = setup([
      item("old", { created_at: "2024-05-01T08:00:00Z" }),
      item("new", { created_at: "2024-05-01T09:00:00Z", channel: "email" }),
      item("mine", { status: "claimed", claimed_by: ME, flagged: true }),
      item("theirs", { status: "claimed", claimed_by: OTHER }),
      item("later", { status: "snoozed" }),
    ]);
    await t.store.load();
    expect(t.store.rows().map((i) => i.id)).toEqual(["old", "new"]);
    expect(t.store.counts()).toEqual({ pending: 2, claimed: 2, awaiting_client: 0, snoozed: 1, open: 5, resolved: 0 });
    expect(t.store.oldestPending()).toBe("2024-05-01T08:00:00Z");

    t.store.setFilters({ status: "claimed", mine: true });
    expect(t.store.rows().map((i) => i.id)).toEqual(["mine"]);
    t.store.setFilters({ status: "open", mine: false, channel: "email" });
    expect(t.store.rows().map((i) => i.id)).toEqual(["new"]);
    t.store.setFilters({ channel: "", search: "FROM THEIRS" });
    expect(t.store.rows().map((i) => i.id)).toEqual(["theirs"]);
  });

  it("reads resolved items only when that tab is opened", async () => {
    const t = setup([item("a"), item("done", { status: "resolved" })]);
    await t.store.load();
    expect(t.pages).toEqual(["open:0+50"]);
    t.store.setFilters({ status: "resolved" });
    await settle();
    expect(t.pages).toEqual(["open:0+50", "resolved:0+100"]);
    expect(t.store.rows().map((i) => i.id)).toEqual(["done"]);
  });

  it("notifies listeners once per frame", async () => {
    const t = setup([item("a"), item("b")]);
    const frames: (() => void)[] = [];
    t.deps.frame = (fn) => void frames.push(fn);
    const listener = vi.fn();
    t.store.subscribe(listener);
    t.store.upsert(item("a", { version: 2 }));
    t.store.upsert(item("b", { version: 2 }));
    expect(frames).toHaveLength(1);
    frames[0]();
    expect(listener).toHaveBeenCalledTimes(1);
  });
});

describe("queue events", () => {
  it("patch the item at once and fetch the full row soon after", async () => {
    const t = setup([item("a")]);
    await t.store.load();
    t.server.set("a", item("a", { version: 2, status: "claimed", claimed_by: OTHER, last_message: { preview: "new", at: "2024-05-01T11:00:00Z" } }));
    t.store.apply(
      ev("queue_item_updated", { id: "a", conversation_id: "conv-a", status: "claimed", version: 2, claimed_by: OTHER, flagged_for_review: false }),
    );
    expect(t.store.get("a")).toMatchObject({ status: "claimed", version: 2, claimed_by: OTHER });
    expect(t.store.get("a")?.last_message?.preview).toBe("hello from a");
    expect(t.deps.queue.get).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(30);
    expect(t.deps.queue.get).toHaveBeenCalledTimes(1);
    expect(t.store.get("a")?.last_message?.preview).toBe("new");
  });

  it("never go back to an older version, and fetch each changed item once per burst", async () => {
    const t = setup([item("a", { version: 5, status: "claimed" })]);
    await t.store.load();
    for (const version of [3, 4, 5]) {
      t.store.apply(
        ev("queue_item_updated", { id: "a", conversation_id: "conv-a", status: "pending", version, claimed_by: null, flagged_for_review: false }),
      );
    }
    expect(t.store.get("a")).toMatchObject({ status: "claimed", version: 5 });
    await vi.advanceTimersByTimeAsync(30);
    expect(t.deps.queue.get).toHaveBeenCalledTimes(1);
  });

  it("bring in an item created since the load", async () => {
    const t = setup([]);
    await t.store.load();
    t.server.set("n", item("n"));
    t.store.apply(
      ev("queue_item_created", { id: "n", conversation_id: "conv-n", status: "pending", version: 1, claimed_by: null, flagged_for_review: false }),
    );
    await vi.advanceTimersByTimeAsync(30);
    expect(t.store.rows().map((i) => i.id)).toEqual(["n"]);
  });

  it("drop an item the caller may no longer see", async () => {
    const t = setup([item("a")]);
    await t.store.load();
    t.server.delete("a");
    t.store.refetch("a");
    await vi.advanceTimersByTimeAsync(30);
    expect(t.store.get("a")).toBeUndefined();
  });

  it("drop every item, message and note of an erased customer's conversation", async () => {
    const t = setup([item("a"), item("b")]);
    await t.store.load();
    t.conversations.set("conv-a", [message("m1", "2024-05-01T10:00:00Z")]);
    const open = t.store.openConversation("conv-a");
    await t.store.loadConversation("conv-a");
    expect(open.messages.size).toBe(1);
    t.store.notes.track("conv-a");
    t.server.delete("a");
    t.store.apply(ev("conversation_erased", { conversation_id: "conv-a", queue_item_id: "a" }));
    expect(t.store.get("a")).toBeUndefined();
    expect(t.store.get("b")).toBeDefined();
    expect(t.store.messages("conv-a")).toEqual([]);
    expect(open.messages.size).toBe(0);
    expect(t.store.notes.list("conv-a")).toEqual([]);
    await vi.advanceTimersByTimeAsync(30);
    expect(t.store.rows().map((i) => i.id)).toEqual(["b"]);
  });

  it("are ignored when they are reports", async () => {
    const t = setup([item("a")]);
    await t.store.load();
    t.store.apply(
      ev("report_ready", { report_id: "r", kind: "daily_summary", period_start: "2024-05-01T00:00:00Z", period_end: "2024-05-02T00:00:00Z" }),
    );
    await vi.advanceTimersByTimeAsync(1000);
    expect(t.deps.queue.get).not.toHaveBeenCalled();
  });
});

describe("an open conversation", () => {
  async function opened() {
    const t = setup([item("a")]);
    t.conversations.set("conv-a", [
      message("m1", "2024-05-01T10:00:00Z"),
      message("m2", "2024-05-01T10:01:00Z"),
      message("m3", "2024-05-01T10:02:00Z"),
    ]);
    await t.store.load();
    t.store.openConversation("conv-a");
    await t.store.loadConversation("conv-a");
    return t;
  }

  it("loads its header and newest messages, oldest first", async () => {
    const t = await opened();
    expect(t.store.conversation("conv-a")?.meta?.customer.display_name).toBe("Ada");
    expect(t.store.messages("conv-a").map((m) => m.id)).toEqual(["m1", "m2", "m3"]);
    expect(t.store.conversation("conv-a")?.nextBefore).toBeNull();
  });

  it("pages back through older messages", async () => {
    const t = setup([item("a")]);
    const many = Array.from({ length: MESSAGE_PAGE + 5 }, (_, i) =>
      message(`m${String(i).padStart(2, "0")}`, `2024-05-01T10:${String(i).padStart(2, "0")}:00Z`),
    );
    t.conversations.set("conv-a", many);
    t.store.openConversation("conv-a");
    await t.store.loadConversation("conv-a");
    expect(t.store.messages("conv-a")).toHaveLength(MESSAGE_PAGE);
    expect(await t.store.loadOlder("conv-a")).toBe(true);
    expect(t.store.messages("conv-a").map((m) => m.id)).toEqual(many.map((m) => m.id));
    expect(await t.store.loadOlder("conv-a")).toBe(false);
  });

  it("shows a released reply at once, and its delivery as it changes", async () => {
    const t = await opened();
    const revision = t.store.conversation("conv-a")?.revision ?? 0;
    t.store.apply(
      ev("agent_message_sent", {
        queue_item_id: "a",
        conversation_id: "conv-a",
        message: { id: "r1", author: "agent", body: "On its way", delivery_status: "queued", created_at: "2024-05-01T10:05:00Z" },
      }),
    );
    expect(t.store.messages("conv-a").at(-1)).toMatchObject({ id: "r1", direction: "outbound", delivery: { status: "queued" } });
    t.store.apply(
      ev("message_status_updated", {
        conversation_id: "conv-a",
        message_id: "r1",
        delivery_status: "failed",
        error: "provider said no",
        at: "2024-05-01T10:05:01Z",
      }),
    );
    expect(t.store.messages("conv-a").at(-1)?.delivery).toMatchObject({ status: "failed", error: "provider said no" });
    expect(t.store.conversation("conv-a")?.revision).toBe(revision + 2);
    // The item's preview changed too.
    await vi.advanceTimersByTimeAsync(30);
    expect(t.deps.queue.get).toHaveBeenCalledWith("a");
  });

  it("keeps a delivery state that overtook the reply's answer, and the expert who wrote it", async () => {
    const t = await opened();
    t.store.putOutbound("conv-a", { id: "r1", author: "expert", body: "Hi", delivery_status: "queued", created_at: "2024-05-01T10:05:00Z" }, ME);
    t.store.apply(
      ev("message_status_updated", { conversation_id: "conv-a", message_id: "r1", delivery_status: "sent", error: null, at: "2024-05-01T10:05:01Z" }),
    );
    t.store.apply(
      ev("agent_message_sent", {
        queue_item_id: "a",
        conversation_id: "conv-a",
        message: { id: "r1", author: "expert", body: "Hi", delivery_status: "queued", created_at: "2024-05-01T10:05:00Z" },
      }),
    );
    expect(t.store.messages("conv-a").at(-1)).toMatchObject({ author_user_id: ME, delivery: { status: "sent" } });
  });

  it("keeps a delivery state whose event overtook a page asked for before it", async () => {
    const t = await opened();
    const queued = { status: "queued", provider_message_id: null, delivered_at: null, error: null } as const;
    t.conversations
      .get("conv-a")
      ?.push(message("r1", "2024-05-01T10:05:00Z", { direction: "outbound", author: "expert", author_user_id: ME, delivery: queued }));
    t.store.putOutbound("conv-a", { id: "r1", author: "expert", body: "Hi", delivery_status: "queued", created_at: "2024-05-01T10:05:00Z" }, ME);
    // `message_created` asks for the newest page (read while the reply was queued); the
    // provider's answer arrives before that page does.
    const pending: (() => void)[] = [];
    const get = t.deps.conversations.get;
    t.deps.conversations.get = async (id, q) => {
      const page = await get(id, q);
      await new Promise<void>((resolve) => pending.push(resolve));
      return page;
    };
    t.store.apply(ev("message_created", { conversation_id: "conv-a", message_id: "r1" }));
    await settle();
    t.store.apply(
      ev("message_status_updated", { conversation_id: "conv-a", message_id: "r1", delivery_status: "sent", error: null, at: "2024-05-01T10:05:01Z" }),
    );
    for (const resolve of pending) resolve();
    await settle();
    expect(t.store.messages("conv-a").at(-1)).toMatchObject({ id: "r1", delivery: { status: "sent" } });
    // A page asked for after the event is taken as it is.
    t.deps.conversations.get = get;
    t.conversations.get("conv-a")?.splice(-1, 1, message("r1", "2024-05-01T10:05:00Z", { direction: "outbound", delivery: { ...queued, status: "failed" } }));
    await t.store.refreshNewest("conv-a");
    expect(t.store.messages("conv-a").at(-1)?.delivery?.status).toBe("failed");
  });

  it("fetches the newest page for a new message or a status of an unknown one", async () => {
    const t = await opened();
    const calls = () => vi.mocked(t.deps.conversations.get).mock.calls.length;
    const before = calls();
    t.conversations.get("conv-a")?.push(message("m4", "2024-05-01T10:03:00Z"));
    t.store.apply(ev("message_created", { conversation_id: "conv-a", message_id: "m4" }));
    await settle();
    expect(calls()).toBe(before + 1);
    expect(t.store.messages("conv-a").at(-1)?.id).toBe("m4");
    t.store.apply(
      ev("message_status_updated", { conversation_id: "conv-a", message_id: "gone", delivery_status: "sent", error: null, at: "2024-05-01T10:05:01Z" }),
    );
    await settle();
    expect(calls()).toBe(before + 2);
  });

  it("is forgotten when closed: its events no longer fetch messages", async () => {
    const t = await opened();
    const before = vi.mocked(t.deps.conversations.get).mock.calls.length;
    t.store.closeConversation("conv-a");
    t.store.apply(ev("message_created", { conversation_id: "conv-a", message_id: "m4" }));
    await settle();
    expect(vi.mocked(t.deps.conversations.get).mock.calls.length).toBe(before);
    expect(t.store.messages("conv-a")).toEqual([]);
  });
});
