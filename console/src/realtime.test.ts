// The numbering rules of realtime.ts: every event applied once, in `seq` order, whatever
// the socket delivers (duplicates, gaps, other orgs) and however the log answers (pages,
// truncation, failures).

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PAGE, Sequencer, type SequencerDeps } from "./realtime";
import type { EventsPage, RealtimeEvent } from "./types";

const ORG = "11111111-1111-1111-1111-111111111111";
const OTHER_ORG = "22222222-2222-2222-2222-222222222222";

function event(seq: number, org = ORG): RealtimeEvent {
  return {
    event: "message_created",
    data: { conversation_id: "c1", message_id: `m${seq}`, org_id: org, seq },
  };
}

type Stored = EventsPage["events"][number];

/** The server's event log, and a sequencer reading it. */
function setup(start = 0) {
  const log: Stored[] = [];
  let latest = 0;
  let truncatedBelow = 0;
  let failing = 0;
  const applied: number[] = [];
  const calls: { after: number; limit: number }[] = [];
  const deps: SequencerDeps = {
    fetchAfter: vi.fn(async (after: number, limit: number): Promise<EventsPage> => {
      calls.push({ after, limit });
      if (failing > 0) {
        failing--;
        throw new Error("502 from the load balancer");
      }
      const events = log.filter((e) => e.seq > after).slice(0, limit);
      return { events, latest_seq: latest, truncated: after + 1 < truncatedBelow };
    }),
    apply: vi.fn((_event: RealtimeEvent, seq: number) => void applied.push(seq)),
    resync: vi.fn(async () => {}),
    caughtUp: vi.fn(),
    failed: vi.fn(),
    stopped: vi.fn(() => false),
    later: (fn: () => void, ms: number) => void setTimeout(fn, ms),
  };
  const sequencer = new Sequencer(ORG, start, deps);
  return {
    sequencer,
    deps,
    applied,
    calls,
    /** Stores events in the log (what `GET /events` will return); returns them. */
    store(...seqs: number[]): RealtimeEvent[] {
      return seqs.map((seq) => {
        const e = event(seq);
        log.push({ ...e, seq, created_at: new Date(seq * 1000).toISOString() });
        latest = Math.max(latest, seq);
        return e;
      });
    },
    /** The log no longer holds anything below `seq` (retention). */
    truncate(seq: number, latestSeq: number) {
      truncatedBelow = seq;
      latest = latestSeq;
      log.splice(0, log.length, ...log.filter((e) => e.seq >= seq));
    },
    failNext(n: number) {
      failing = n;
    },
  };
}

/** Lets every promise chain that waits for no timer run to its end. */
const settle = () => vi.advanceTimersByTimeAsync(0);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("Sequencer", () => {
  it("applies consecutive events at once, in order, without asking the log", () => {
    const t = setup(5);
    for (const e of t.store(6, 7, 8)) t.sequencer.receive(e);
    expect(t.applied).toEqual([6, 7, 8]);
    expect(t.sequencer.seq).toBe(8);
    expect(t.deps.fetchAfter).not.toHaveBeenCalled();
  });

  it("drops replays, duplicates, other orgs' events and events without a number", () => {
    const t = setup(5);
    const [six] = t.store(6);
    t.sequencer.receive(six);
    t.sequencer.receive(six);
    t.sequencer.receive(event(4));
    t.sequencer.receive(event(7, OTHER_ORG));
    t.sequencer.receive(event(Number.NaN));
    expect(t.applied).toEqual([6]);
    expect(t.deps.fetchAfter).not.toHaveBeenCalled();
  });

  it("fills a gap from the log before applying the event that revealed it", async () => {
    const t = setup(1);
    const events = t.store(2, 3, 4, 5);
    t.sequencer.receive(events[3]); // 5 arrives, 2 to 4 were missed
    expect(t.applied).toEqual([]);
    await settle();
    expect(t.applied).toEqual([2, 3, 4, 5]);
    expect(t.calls).toEqual([{ after: 1, limit: PAGE }]);
    expect(t.deps.caughtUp).toHaveBeenCalledWith(4);
    // The missed events delivered late change nothing.
    for (const e of events) t.sequencer.receive(e);
    expect(t.applied).toEqual([2, 3, 4, 5]);
  });

  it("holds events that arrive during a catch-up until it is done", async () => {
    const t = setup(0);
    t.store(1, 2);
    const catching = t.sequencer.catchUp();
    const [three] = t.store(3);
    t.sequencer.receive(three); // next in line, but the catch-up has not applied 1 and 2 yet
    expect(t.applied).toEqual([]);
    await catching;
    expect(t.applied).toEqual([1, 2, 3]);
  });

  it("applies a held event from the socket when the log is not there yet", async () => {
    const t = setup(0);
    t.store(1);
    t.sequencer.receive(event(2)); // delivered, but the log's page was read before it
    await settle();
    expect(t.applied).toEqual([1, 2]);
    expect(t.sequencer.seq).toBe(2);
    await vi.runAllTimersAsync();
    expect(t.calls).toHaveLength(1); // nothing is missing: no retry
  });

  it("pages through a long gap", async () => {
    const t = setup(0);
    t.store(...Array.from({ length: 2 * PAGE + 7 }, (_, i) => i + 1));
    await t.sequencer.catchUp();
    expect(t.applied).toEqual(Array.from({ length: 2 * PAGE + 7 }, (_, i) => i + 1));
    expect(t.calls.map((c) => c.after)).toEqual([0, PAGE, 2 * PAGE]);
    expect(t.deps.caughtUp).toHaveBeenCalledWith(2 * PAGE + 7);
  });

  it("asks again when a catch-up is requested while one runs (a reconnect)", async () => {
    const t = setup(0);
    t.store(1);
    const first = t.sequencer.catchUp();
    t.store(2, 3); // stored after the first page was read, without a socket event
    const second = t.sequencer.catchUp();
    expect(second).toBe(first);
    await first;
    expect(t.applied).toEqual([1, 2, 3]);
    expect(t.calls.map((c) => c.after)).toEqual([0, 1]);
  });

  it("reloads the lists when the log no longer holds the gap, then continues from its end", async () => {
    const t = setup(3);
    t.store(4, 5, 6, 7, 8, 9);
    t.truncate(8, 9);
    t.sequencer.receive(event(9));
    await settle();
    expect(t.deps.resync).toHaveBeenCalledTimes(1);
    expect(t.applied).toEqual([]); // the reload shows them
    expect(t.sequencer.seq).toBe(9);
    t.sequencer.receive(t.store(10)[0]);
    expect(t.applied).toEqual([10]);
  });

  it("keeps asking while an event's predecessor is not readable yet", async () => {
    const t = setup(0);
    t.sequencer.receive(event(2)); // 1 is numbered but not yet in the log
    await settle();
    expect(t.applied).toEqual([]);
    expect(t.calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(200);
    expect(t.calls).toHaveLength(2);
    t.store(1, 2);
    await vi.advanceTimersByTimeAsync(200);
    expect(t.applied).toEqual([1, 2]);
    await vi.runAllTimersAsync();
    expect(t.calls).toHaveLength(3); // and stops asking once it is whole
  });

  it("retries a failing log every 500 ms, and gives up for 2 s after 20 failures", async () => {
    const t = setup(0);
    t.store(1);
    t.failNext(3);
    const done = t.sequencer.catchUp();
    await vi.advanceTimersByTimeAsync(1500);
    await done;
    expect(t.applied).toEqual([1]);
    expect(t.deps.failed).not.toHaveBeenCalled();

    t.store(2);
    t.failNext(21);
    const failing = t.sequencer.catchUp();
    await vi.advanceTimersByTimeAsync(20 * 500);
    await failing;
    expect(t.deps.failed).toHaveBeenCalledWith("catching up failed: 502 from the load balancer");
    expect(t.applied).toEqual([1]);
    await vi.advanceTimersByTimeAsync(1999);
    expect(t.applied).toEqual([1]);
    await vi.advanceTimersByTimeAsync(1); // the retry 2 s later finds the log healthy
    expect(t.applied).toEqual([1, 2]);
  });

  it("schedules nothing once stopped", async () => {
    const t = setup(0);
    t.deps.stopped = vi.fn(() => true);
    t.failNext(1);
    await t.sequencer.catchUp();
    expect(t.deps.failed).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});
