// Live updates: Socket.IO over a websocket (the load balancer has no stickiness, so no
// long-polling), and the per-org `seq` that makes them recoverable. Every event carries the
// org's next number; a jump, or any (re)connect, makes the console fetch what it missed from
// `GET /events?after=` and apply it in order before anything newer. The screen is therefore
// never silently stale: either it is live, or the indicator says it is not.
//
// The numbering rules live in `Sequencer`, which knows nothing of sockets or timers, so they
// are unit-tested (realtime.test.ts); `Realtime` wires it to the socket and the indicator.

import { io, type Socket } from "socket.io-client";
import { events } from "./endpoints";
import type { EventName, EventsPage, RealtimeEvent } from "./types";

/**
 * Every event the server sends to the org. All are listened to, even those the console
 * ignores, so that no number looks missed. A `Record`, so a new event in the document does
 * not compile until it is listed here.
 */
const LISTENED: Record<EventName, true> = {
  queue_item_created: true,
  queue_item_updated: true,
  message_created: true,
  agent_message_sent: true,
  message_status_updated: true,
  report_ready: true,
  note_added: true,
  conversation_erased: true,
};
export const EVENT_NAMES = Object.keys(LISTENED) as EventName[];

export type LinkState = "connecting" | "live" | "reconnecting" | "catching-up";

export interface LinkStatus {
  state: LinkState;
  /** When the connection was lost (reconnecting), ISO time. */
  since: string | null;
  /** Events fetched by the last catch-up. */
  caughtUp: number;
  /** Why the last attempt failed, for the indicator's tooltip. */
  detail: string | null;
}

export interface Handlers {
  /** One event, in `seq` order, exactly once per number. */
  apply(event: RealtimeEvent, seq: number): void;
  /** The log no longer holds what was missed: reload everything. */
  resync(): Promise<void>;
  status(s: LinkStatus): void;
  /** The server refused the token. */
  refused(reason: string): void;
}

/** What the sequencer needs from its surroundings. */
export interface SequencerDeps {
  /** `GET /events?after=&limit=`. */
  fetchAfter(after: number, limit: number): Promise<EventsPage>;
  /** One event, in `seq` order, exactly once per number. */
  apply(event: RealtimeEvent, seq: number): void;
  /** The log no longer holds what was missed: reload everything. */
  resync(): Promise<void>;
  /** A catch-up reached the newest event; `fetched` of them came from the log. */
  caughtUp(fetched: number): void;
  /** A catch-up gave up for now (it is tried again later). */
  failed(detail: string): void;
  /** True once the session ended: nothing is retried any more. */
  stopped(): boolean;
  /** Runs `fn` in `ms` (tests replace the timers). */
  later(fn: () => void, ms: number): void;
}

export const PAGE = 500;

/** Applies an org's events in `seq` order, each once, fetching any gap from the log. */
export class Sequencer {
  private lastSeq: number;
  private buffer: { event: RealtimeEvent; seq: number }[] = [];
  private catching: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly orgId: string,
    startSeq: number,
    private readonly deps: SequencerDeps,
  ) {
    this.lastSeq = startSeq;
  }

  /** The number of the last event applied. */
  get seq(): number {
    return this.lastSeq;
  }

  /** An event as the socket delivered it. */
  receive(event: RealtimeEvent): void {
    if (event.data.org_id !== this.orgId) return;
    const seq = Number(event.data.seq);
    if (!Number.isFinite(seq)) return;
    if (seq <= this.lastSeq) return; // already applied (a replay, or delivered twice)
    if (this.catching || seq !== this.lastSeq + 1) {
      // A gap: something was missed. Keep this one and fetch the rest first.
      this.buffer.push({ event, seq });
      void this.catchUp();
      return;
    }
    this.lastSeq = seq;
    this.deps.apply(event, seq);
  }

  /** Fetches and applies everything after `lastSeq`, then what arrived meanwhile. */
  catchUp(): Promise<void> {
    if (this.catching) {
      this.again = true;
      return this.catching;
    }
    this.catching = (async () => {
      let fetched = 0;
      let failures = 0;
      let retry = 0;
      try {
        for (;;) {
          let page: EventsPage;
          try {
            page = await this.deps.fetchAfter(this.lastSeq, PAGE);
          } catch (e) {
            // The API is reachable through the load balancer even while one pod is down;
            // a failure here is brief. Try again rather than show stale data as live.
            if (this.deps.stopped() || ++failures > 20) throw e;
            await new Promise<void>((r) => this.deps.later(r, 500));
            continue;
          }
          if (page.truncated) {
            // Older than the retention: the log cannot fill the gap, the lists can.
            this.lastSeq = page.latest_seq;
            this.buffer = [];
            await this.deps.resync();
            break;
          }
          for (const e of page.events) {
            if (e.seq <= this.lastSeq) continue;
            this.lastSeq = e.seq;
            fetched++;
            this.deps.apply(e, e.seq);
          }
          if (page.events.length < PAGE || this.lastSeq >= page.latest_seq) {
            if (!this.again) break;
            this.again = false;
          }
        }
        const buffered = this.buffer.sort((a, b) => a.seq - b.seq);
        this.buffer = [];
        for (const b of buffered) {
          if (b.seq === this.lastSeq + 1) {
            this.lastSeq = b.seq;
            this.deps.apply(b.event, b.seq);
          } else if (b.seq > this.lastSeq + 1) {
            // Still a hole (an event not yet readable): fetch again shortly.
            this.buffer.push(b);
          }
        }
        this.deps.caughtUp(fetched);
      } catch (e) {
        this.deps.failed(`catching up failed: ${(e as Error).message}`);
        retry = 2000;
      } finally {
        this.catching = null;
      }
      if (this.buffer.length > 0) retry = Math.max(retry, 200);
      if (retry > 0 && !this.deps.stopped()) this.deps.later(() => void this.catchUp(), retry);
    })();
    return this.catching;
  }
}

export class Realtime {
  private socket: Socket | null = null;
  private readonly sequencer: Sequencer;
  private status: LinkStatus = { state: "connecting", since: null, caughtUp: 0, detail: null };
  private stopped = false;
  /** Listeners of events outside the numbered log (presence): no `seq`, never replayed. */
  private readonly ephemeral: [string, (data: unknown) => void][] = [];
  private readonly connected: (() => void)[] = [];

  constructor(
    private readonly token: string,
    orgId: string,
    startSeq: number,
    private readonly on: Handlers,
  ) {
    this.sequencer = new Sequencer(orgId, startSeq, {
      fetchAfter: (after, limit) => events.after(orgId, after, limit),
      apply: (event, seq) => on.apply(event, seq),
      resync: () => on.resync(),
      caughtUp: (fetched) => {
        if (this.socket?.connected) this.setStatus({ state: "live", caughtUp: fetched });
      },
      failed: (detail) => this.setStatus({ detail }),
      stopped: () => this.stopped,
      later: (fn, ms) => window.setTimeout(fn, ms),
    });
  }

  get seq(): number {
    return this.sequencer.seq;
  }

  start(): void {
    const socket = io(location.origin, {
      path: "/socket.io",
      transports: ["websocket"],
      auth: { token: this.token },
      reconnectionDelay: 500,
      reconnectionDelayMax: 4000,
      timeout: 5000,
    });
    this.socket = socket;
    socket.on("connect", () => {
      this.setStatus({ state: "catching-up", detail: null });
      void this.sequencer.catchUp();
      for (const fn of this.connected) fn();
    });
    for (const [name, fn] of this.ephemeral) socket.on(name, fn);
    socket.on("disconnect", (reason) => {
      if (this.stopped) return;
      this.setStatus({ state: "reconnecting", since: this.status.since ?? new Date().toISOString(), detail: reason });
      // A server-side disconnect (token expiry, membership removed, a pod shutting down)
      // is not retried by the client on its own.
      if (reason === "io server disconnect") window.setTimeout(() => this.socket?.connect(), 500);
    });
    socket.on("connect_error", (err: Error) => {
      if (this.stopped) return;
      const message = err.message || "connection failed";
      if (/expired|invalid|token|revoked|no org|member/i.test(message) && !socket.active) {
        this.on.refused(message);
        return;
      }
      this.setStatus({
        state: this.status.state === "connecting" ? "connecting" : "reconnecting",
        since: this.status.since ?? new Date().toISOString(),
        detail: message,
      });
      // Refused by the server's handshake rather than unreachable: the client stops
      // retrying by itself, so try again a little later.
      if (!socket.active) window.setTimeout(() => this.socket?.connect(), 2000);
    });
    for (const name of EVENT_NAMES) {
      // The payload is the document's `RealtimeEvent` for this name (checked server-side
      // by the OpenAPI tests); the sequencer still checks the org and the number.
      socket.on(name, (data: unknown) => this.sequencer.receive({ event: name, data } as RealtimeEvent));
    }
  }

  /** Listens to an event that is not numbered (see `ephemeral`); call before `start`. */
  listen(name: string, fn: (data: unknown) => void): void {
    this.ephemeral.push([name, fn]);
  }

  /** Runs `fn` on every (re)connect; call before `start`. */
  onConnect(fn: () => void): void {
    this.connected.push(fn);
  }

  /** Sends an event to the server if connected (nothing is queued while offline). */
  send(name: string, data?: unknown): void {
    if (!this.socket?.connected) return;
    if (data === undefined) this.socket.emit(name);
    else this.socket.emit(name, data);
  }

  stop(): void {
    this.stopped = true;
    this.socket?.removeAllListeners();
    this.socket?.disconnect();
    this.socket = null;
  }

  private setStatus(patch: Partial<LinkStatus>): void {
    this.status = { ...this.status, ...patch };
    if (this.status.state === "live") this.status.since = null;
    this.on.status({ ...this.status });
  }
}

/** The org's newest event number: events after it are what the lists do not show yet. */
export async function latestSeq(orgId: string): Promise<number> {
  const page = await events.after(orgId, 0, 1);
  return page.latest_seq;
}
