// The one "are you sure?" of the console: a modal dialog whose default (focused) answer is
// Cancel, so Enter or Esc never confirms something that cannot be undone.

import { type Child, h } from "../dom";

export function confirmDialog(message: Child | Child[], confirmLabel: string, id = "confirm"): Promise<boolean> {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-text`, id },
      h("h2", { id: `${id}-title`, text: "Please confirm" }),
      h("div", { id: `${id}-text` }, message),
      h(
        "form",
        { method: "dialog", class: "actions" },
        h("button", { value: "cancel", text: "Cancel", autofocus: true }),
        h("button", { value: "ok", class: "danger", text: confirmLabel }),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
