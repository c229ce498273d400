// Opt-in alerts for an expert whose console tab is in the background: a browser
// notification and a short tone for each new pending or newly flagged item. Nothing happens
// while the tab is visible (the queue shows it), nor until the expert turned it on in the
// settings (the browser's permission is asked on that click: browsers refuse a request that
// no user gesture started). The tone is generated with Web Audio, so no media file is
// fetched (the CSP allows no media source but the console's own).
//
// `decide` is the rule (tested in notify.test.ts); `Notifier` does the browser part.

import type { EventData, RealtimeEvent } from "./types";

export interface Prefs {
  /** Browser notifications (needs the browser's permission too). */
  notify: boolean;
  /** A short tone. */
  sound: boolean;
}

const KEY = "sb.notify";

export function loadPrefs(storage: Pick<Storage, "getItem"> = localStorage): Prefs {
  try {
    const p = JSON.parse(storage.getItem(KEY) ?? "{}") as Partial<Prefs>;
    return { notify: p.notify === true, sound: p.sound === true };
  } catch {
    return { notify: false, sound: false };
  }
}

export function savePrefs(p: Prefs, storage: Pick<Storage, "setItem"> = localStorage): void {
  storage.setItem(KEY, JSON.stringify(p));
}

/** What the item looked like before the event, if the console knew it. */
export interface Before {
  status: string;
  flagged: boolean;
}

export interface Alert {
  /** One per item: a newer alert for the same item replaces the older one. */
  tag: string;
  title: string;
  body: string;
  /** The item to open when the notification is clicked. */
  itemId: string;
}

/** The item the event is about as the console knew it before applying the event. */
export function priorState(event: RealtimeEvent, get: (id: string) => { status: string; flagged: boolean } | undefined): Before | undefined {
  if (event.event !== "queue_item_created" && event.event !== "queue_item_updated") return undefined;
  const known = get(event.data.id);
  return known ? { status: known.status, flagged: known.flagged } : undefined;
}

/**
 * Whether `event` deserves an alert, and which: only while the tab is hidden, only when the
 * expert opted in to something, and only for an item that became pending (new, or the
 * customer wrote again) or became flagged for review. Any other change stays quiet.
 */
export function decide(event: RealtimeEvent, before: Before | undefined, ctx: { hidden: boolean; prefs: Prefs }): Alert | null {
  if (!ctx.hidden || !(ctx.prefs.notify || ctx.prefs.sound)) return null;
  if (event.event !== "queue_item_created" && event.event !== "queue_item_updated") return null;
  const item = event.data as EventData<"queue_item_created">;
  const becamePending = item.status === "pending" && (event.event === "queue_item_created" || !before || before.status !== "pending");
  const becameFlagged = item.flagged_for_review && (!before || !before.flagged);
  if (becameFlagged && (item.status === "pending" || item.status === "claimed")) {
    return { tag: `item-${item.id}`, title: "Flagged for review", body: "The agent could not answer: a draft needs checking.", itemId: item.id };
  }
  if (becamePending) {
    return {
      tag: `item-${item.id}`,
      title: event.event === "queue_item_created" ? "New item in the queue" : "A customer wrote again",
      body: "A conversation is waiting for an expert.",
      itemId: item.id,
    };
  }
  return null;
}

/** Plays the alert tone: two short sine beeps, generated (no file). */
function tone(): void {
  const Ctx = window.AudioContext ?? (window as unknown as { webkitAudioContext?: typeof AudioContext }).webkitAudioContext;
  if (!Ctx) return;
  const ctx = new Ctx();
  const start = ctx.currentTime;
  for (const [at, freq] of [
    [0, 880],
    [0.18, 660],
  ] as const) {
    const osc = ctx.createOscillator();
    const gain = ctx.createGain();
    osc.type = "sine";
    osc.frequency.value = freq;
    gain.gain.setValueAtTime(0.0001, start + at);
    gain.gain.exponentialRampToValueAtTime(0.2, start + at + 0.02);
    gain.gain.exponentialRampToValueAtTime(0.0001, start + at + 0.15);
    osc.connect(gain).connect(ctx.destination);
    osc.start(start + at);
    osc.stop(start + at + 0.16);
  }
  window.setTimeout(() => void ctx.close(), 600);
}

/** The browser side: shows the notification, plays the tone (at most one every 2 s). */
export class Notifier {
  prefs: Prefs = loadPrefs();
  private lastTone = 0;

  constructor(private readonly open: (itemId: string) => void) {}

  /** Called with each event before the store applies it. */
  consider(event: RealtimeEvent, before: Before | undefined): void {
    const alert = decide(event, before, { hidden: document.visibilityState === "hidden", prefs: this.prefs });
    if (!alert) return;
    if (this.prefs.notify && "Notification" in window && Notification.permission === "granted") {
      const n = new Notification(alert.title, { body: alert.body, tag: alert.tag });
      n.onclick = () => {
        window.focus();
        this.open(alert.itemId);
        n.close();
      };
    }
    if (this.prefs.sound && Date.now() - this.lastTone > 2000) {
      this.lastTone = Date.now();
      try {
        tone();
      } catch {
        // No audio device, or the browser refused: the notification is enough.
      }
    }
  }

  /**
   * Turns notifications on or off; on asks the browser's permission (this runs on the
   * click). Returns what the browser said, for the settings to show.
   */
  async setNotify(on: boolean): Promise<NotificationPermission | "unsupported"> {
    if (!("Notification" in window)) {
      this.save({ ...this.prefs, notify: false });
      return "unsupported";
    }
    let permission = Notification.permission;
    if (on && permission === "default") permission = await Notification.requestPermission();
    this.save({ ...this.prefs, notify: on && permission === "granted" });
    return permission;
  }

  setSound(on: boolean): void {
    this.save({ ...this.prefs, sound: on });
    if (on) {
      try {
        tone(); // a sample, and it unlocks audio on this user gesture
      } catch {
        // see consider()
      }
    }
  }

  private save(p: Prefs): void {
    this.prefs = p;
    savePrefs(p);
  }
}
