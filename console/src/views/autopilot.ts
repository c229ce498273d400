// The autopilot's kill switch in the header, for admins: one press turns the org's
// autopilot off and stops every draft on hold in every console at once. No confirmation:
// stopping is always safe (the items wait for an expert), and it must be quick.

import { ApiError } from "../api";
import { h } from "../dom";
import { autopilot } from "../endpoints";

export function pauseControl(orgId: string): HTMLElement {
  const said = h("span", { class: "autopilot-state", id: "autopilot-state", role: "status", "aria-live": "polite" });
  const button = h("button", {
    type: "button",
    id: "autopilot-pause",
    text: "Pause autopilot",
    on: {
      click: () => {
        button.disabled = true;
        said.textContent = "Pausing…";
        void (async () => {
          try {
            await autopilot.pause(orgId);
            said.textContent = "Autopilot paused: no draft sends itself; held drafts wait for an expert.";
          } catch (e) {
            said.textContent = `Could not pause the autopilot: ${e instanceof ApiError ? e.message : "the server did not answer"}. Try again.`;
          } finally {
            button.disabled = false;
          }
        })();
      },
    },
  });
  return h("span", { class: "autopilot-pause" }, button, said);
}
