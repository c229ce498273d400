// Live updates: Socket.IO over a websocket (the load balancer has no stickiness, so no
// long-polling), and the per-org `seq` that makes them recoverable. Every event carries the
// org's next number; a jump, or any (re)connect, makes the console fetch what it missed from
// `GET /events?after=` and apply it in order before anything newer. The screen is therefore
// never silently stale: either it is live, or the indicator says it is not.

import { io, type Socket } from "socket.io-client";
import { api } from "./api";
import type { EventsPage } from "./types";

export const EVENT_NAMES = [
  "queue_item_created",
  "queue_item_updated",
  "message_created",
  "agent_message_sent",
  "message_status_updated",
] as const;

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
  apply(event: string, data: Record<string, unknown>, seq: number): void;
  /** The log no longer holds what was missed: reload everything. */
  resync(): Promise<void>;
  status(s: LinkStatus): void;
  /** The server refused the token. */
  refused(reason: string): void;
}

const PAGE = 500;

export class Realtime {
  private socket: Socket | null = null;
  private lastSeq: number;
  private buffer: { event: string; data: Record<string, unknown>; seq: number }[] = [];
  private catching: Promise<void> | null = null;
  private again = false;
  private status: LinkStatus = { state: "connecting", since: null, caughtUp: 0, detail: null };
  private stopped = false;

  constructor(
    private readonly token: string,
    private readonly orgId: string,
    startSeq: number,
    private readonly on: Handlers,
  ) {
    this.lastSeq = startSeq;
  }

  get seq(): number {
    return this.lastSeq;
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
      void this.catchUp();
    });
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
      if (/expired|invalid|token|no org|member/i.test(message) && !socket.active) {
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
      socket.on(name, (data: Record<string, unknown>) => this.receive(name, data));
    }
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

  private receive(event: string, data: Record<string, unknown>): void {
    if (data.org_id !== this.orgId) return;
    const seq = Number(data.seq);
    if (!Number.isFinite(seq)) return;
    if (seq <= this.lastSeq) return; // already applied (a replay, or delivered twice)
    if (this.catching || seq !== this.lastSeq + 1) {
      // A gap: something was missed. Keep this one and fetch the rest first.
      this.buffer.push({ event, data, seq });
      void this.catchUp();
      return;
    }
    this.lastSeq = seq;
    this.on.apply(event, data, seq);
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
            page = await api<EventsPage>(
              "GET",
              `/events?org_id=${this.orgId}&after=${this.lastSeq}&limit=${PAGE}`,
            );
          } catch (e) {
            // The API is reachable through the load balancer even while one pod is down;
            // a failure here is brief. Try again rather than show stale data as live.
            if (this.stopped || ++failures > 20) throw e;
            await new Promise((r) => setTimeout(r, 500));
            continue;
          }
          if (page.truncated) {
            // Older than the retention: the log cannot fill the gap, the lists can.
            this.lastSeq = page.latest_seq;
            this.buffer = [];
            await this.on.resync();
            break;
          }
          for (const e of page.events) {
            if (e.seq <= this.lastSeq) continue;
            this.lastSeq = e.seq;
            fetched++;
            this.on.apply(e.event, e.data, e.seq);
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
            this.on.apply(b.event, b.data, b.seq);
          } else if (b.seq > this.lastSeq + 1) {
            // Still a hole (an event not yet readable): fetch again shortly.
            this.buffer.push(b);
          }
        }
        if (this.socket?.connected) this.setStatus({ state: "live", caughtUp: fetched });
      } catch (e) {
        this.setStatus({ detail: `catching up failed: ${(e as Error).message}` });
        retry = 2000;
      } finally {
        this.catching = null;
      }
      if (this.buffer.length > 0) retry = Math.max(retry, 200);
      if (retry > 0 && !this.stopped) window.setTimeout(() => void this.catchUp(), retry);
    })();
    return this.catching;
  }
}

/** The org's newest event number: events after it are what the lists do not show yet. */
export async function latestSeq(orgId: string): Promise<number> {
  const page = await api<EventsPage>("GET", `/events?org_id=${orgId}&after=0&limit=1`);
  return page.latest_seq;
}
