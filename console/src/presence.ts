// Who else has a conversation open. The console tells the server which conversation it
// shows (`viewing {conversation_id}`, `stopped_viewing`; again after every reconnect), and
// the server sends the org's sockets a `presence` event with the conversation's viewers
// (crates/realtime/src/presence.rs). Presence is ephemeral: it has no `seq`, is never
// replayed, and each announcement carries a `ttl_secs` after which the console forgets it
// unless another one came, so a viewer whose pod died disappears here too.
//
// `PresenceBoard` holds the rules (tested in presence.test.ts); `presence` wires them to the
// session's socket through `bind`.

import type { Schemas } from "./types";

export type PresenceEvent = Schemas["PresenceEvent"];
export type Viewer = Schemas["Viewer"];

/** What the board needs from its surroundings (tests pass their own clock). */
export interface BoardDeps {
  now(): number;
}

/** The latest announcement of each conversation, until it expires. */
export class PresenceBoard {
  private readonly seen = new Map<string, { viewers: Viewer[]; until: number }>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly deps: BoardDeps = { now: () => Date.now() }) {}

  /** A `presence` event as the socket delivered it; anything malformed is dropped. */
  receive(data: unknown): boolean {
    const e = data as Partial<PresenceEvent> | null;
    if (!e || typeof e.conversation_id !== "string" || !Array.isArray(e.viewers)) return false;
    const ttl = typeof e.ttl_secs === "number" && e.ttl_secs > 0 ? e.ttl_secs : 10;
    const viewers = e.viewers.filter((v): v is Viewer => !!v && typeof v.user_id === "string" && typeof v.name === "string");
    this.seen.set(e.conversation_id, { viewers, until: this.deps.now() + ttl * 1000 });
    this.changed();
    return true;
  }

  /** The others viewing `conversationId` now (never `me`). */
  viewers(conversationId: string, me: string): Viewer[] {
    const entry = this.seen.get(conversationId);
    if (!entry) return [];
    if (entry.until <= this.deps.now()) {
      this.seen.delete(conversationId);
      return [];
    }
    return entry.viewers.filter((v) => v.user_id !== me);
  }

  /** Drops expired announcements; whether any was dropped. */
  sweep(): boolean {
    const now = this.deps.now();
    let dropped = false;
    for (const [id, entry] of this.seen) {
      if (entry.until <= now) {
        this.seen.delete(id);
        dropped = true;
      }
    }
    if (dropped) this.changed();
    return dropped;
  }

  /** Forgets everything (the socket reconnected: the server announces afresh). */
  clear(): void {
    if (this.seen.size === 0) return;
    this.seen.clear();
    this.changed();
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }
}

/** The socket operations presence needs (`Realtime` provides them). */
export interface PresenceSocket {
  send(name: string, data?: unknown): void;
  listen(name: string, fn: (data: unknown) => void): void;
  onConnect(fn: () => void): void;
}

/** The session's presence: what this console views, and what the others do. */
export class Presence {
  readonly board = new PresenceBoard();
  private socket: PresenceSocket | null = null;
  private current: string | null = null;
  private sweeper: number | null = null;

  /** Attaches to the session's socket (before it starts). */
  bind(socket: PresenceSocket): void {
    this.socket = socket;
    this.current = null;
    this.board.clear();
    socket.listen("presence", (data) => this.board.receive(data));
    socket.onConnect(() => {
      if (this.current) socket.send("viewing", { conversation_id: this.current });
    });
    if (this.sweeper === null) this.sweeper = window.setInterval(() => this.board.sweep(), 1000);
  }

  /** This console now shows `conversationId` (or none). */
  view(conversationId: string | null): void {
    if (conversationId === this.current) return;
    this.current = conversationId;
    if (conversationId) this.socket?.send("viewing", { conversation_id: conversationId });
    else this.socket?.send("stopped_viewing");
  }

  /** The session ended. */
  unbind(): void {
    this.socket = null;
    this.current = null;
    this.board.clear();
    if (this.sweeper !== null) window.clearInterval(this.sweeper);
    this.sweeper = null;
  }
}

/** The one session's presence (the console has one socket at a time). */
export const presence = new Presence();
