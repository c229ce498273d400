// The console's own settings: opt-in alerts for new pending and flagged items while the tab
// is in the background (see notify.ts). The browser's permission is asked when the expert
// ticks the box, a user gesture, as browsers require.

import { h } from "../dom";
import type { Notifier } from "../notify";

export interface SettingsControls {
  button: HTMLButtonElement;
  dialog: HTMLDialogElement;
}

export function settingsControls(notifier: Notifier): SettingsControls {
  const state = h("p", { class: "muted", id: "notify-state", role: "status", "aria-live": "polite" });
  const notify = h("input", {
    type: "checkbox",
    id: "notify-browser",
    on: {
      change: () => {
        void (async () => {
          const answer = await notifier.setNotify(notify.checked);
          notify.checked = notifier.prefs.notify;
          state.textContent =
            answer === "unsupported"
              ? "This browser cannot show notifications."
              : answer === "denied" && !notifier.prefs.notify
                ? "The browser blocks notifications for this site: allow them in its site settings."
                : notifier.prefs.notify
                  ? "Notifications are on."
                  : "Notifications are off.";
        })();
      },
    },
  });
  const sound = h("input", {
    type: "checkbox",
    id: "notify-sound",
    on: { change: () => notifier.setSound(sound.checked) },
  });
  const dialog = h(
    "dialog",
    { class: "help settings", "aria-labelledby": "settings-title" },
    h("h2", { id: "settings-title", text: "Settings" }),
    h("p", { text: "Alerts for new pending and flagged items, only while this tab is in the background." }),
    h("div", { class: "check" }, notify, h("label", { for: "notify-browser", text: "Browser notifications" })),
    h("div", { class: "check" }, sound, h("label", { for: "notify-sound", text: "Play a sound" })),
    state,
    h("form", { method: "dialog" }, h("button", { class: "primary", text: "Close" })),
  );
  const button = h("button", {
    type: "button",
    class: "link",
    id: "open-settings",
    text: "Settings",
    on: {
      click: () => {
        notify.checked = notifier.prefs.notify;
        sound.checked = notifier.prefs.sound;
        state.textContent = "";
        dialog.showModal();
      },
    },
  });
  return { button, dialog };
}
