// `#/admin/saved-replies`: an org admin's list of saved replies, with a form to add one and
// an edit / delete per reply. The server checks the placeholders; its 422 names the unknown
// ones and the form shows that message as it is.

import "./team.css";
import { ApiError } from "../api";
import { h, mount, submitForm } from "../dom";
import { savedReplies } from "../endpoints";
import { clock } from "../format";
import { PLACEHOLDERS, type SavedReply } from "../saved-replies";

function problem(e: unknown, what: string): string {
  if (e instanceof ApiError && e.status === 403) return `Only an admin of this org can ${what}.`;
  return `Could not ${what}: ${(e as Error).message}`;
}

export function savedRepliesScreen(root: HTMLElement, orgId: string): void {
  const status = h("p", { role: "status", class: "status-line", id: "sr-status" });
  const list = h("div", { class: "admin-list" });
  const formError = h("p", { class: "form-error", role: "alert", id: "sr-error" });
  const name = h("input", { id: "sr-name", required: true, maxlength: "100", autocomplete: "off" });
  const body = h("textarea", { id: "sr-body", rows: 5, required: true, maxlength: "4000", "aria-describedby": "sr-placeholders" });
  const submit = h("button", { type: "submit", class: "primary", id: "sr-submit", text: "Save reply" });
  const cancel = h("button", { type: "button", id: "sr-cancel", text: "Cancel editing", hidden: true, on: { click: () => edit(null) } });
  const heading = h("h3", { id: "sr-form-title", text: "New saved reply" });
  let editing: SavedReply | null = null;

  function edit(r: SavedReply | null): void {
    editing = r;
    heading.textContent = r ? `Edit “${r.name}”` : "New saved reply";
    submit.textContent = r ? "Save changes" : "Save reply";
    cancel.hidden = !r;
    name.value = r?.name ?? "";
    body.value = r?.body ?? "";
    formError.textContent = "";
    if (r) name.focus();
  }

  const form = submitForm(
    {
      class: "admin-form",
      "aria-labelledby": "sr-form-title",
    },
    formError,
    async () => {
      const values = { name: name.value.trim(), body: body.value };
      try {
        const saved = editing
          ? await savedReplies.update(orgId, editing.id, values)
          : await savedReplies.create(orgId, values);
        status.textContent = `Saved “${saved.name}”.`;
        edit(null);
        void load(`Saved “${saved.name}”. `);
      } catch (e) {
        formError.textContent = problem(e, "save it");
      }
    },
    heading,
    h("div", { class: "field" }, h("label", { for: "sr-name", text: "Name (what experts type after /)" }), name),
    h("div", { class: "field" }, h("label", { for: "sr-body", text: "Text" }), body),
    h(
      "p",
      { class: "muted", id: "sr-placeholders" },
      "Placeholders, filled in when an expert inserts the reply: ",
      PLACEHOLDERS.flatMap((p, i) => [i ? ", " : "", h("code", { text: `{{${p}}}` })]),
      ".",
    ),
    formError,
    h("div", { class: "buttons" }, submit, cancel),
  );

  async function load(notice = ""): Promise<void> {
    try {
      const page = await savedReplies.list(orgId);
      status.textContent = `${notice}${page.items.length} saved repl${page.items.length === 1 ? "y" : "ies"}`;
      mount(
        list,
        h(
          "table",
          { class: "grid" },
          h("caption", { class: "visually-hidden", text: "Saved replies" }),
          h("thead", {}, h("tr", {}, ["Name", "Text", "Changed", ""].map((c) => h("th", { scope: "col", text: c })))),
          h(
            "tbody",
            {},
            page.items.map((r) => {
              const del = h("button", { type: "button", class: "danger", text: "Delete", "aria-label": `Delete ${r.name}` });
              let armed = false;
              del.addEventListener("click", async () => {
                if (!armed) {
                  armed = true;
                  del.textContent = "Confirm delete";
                  return;
                }
                try {
                  await savedReplies.remove(orgId, r.id);
                  if (editing?.id === r.id) edit(null);
                  void load(`Deleted “${r.name}”. `);
                } catch (e) {
                  status.textContent = problem(e, "delete it");
                }
              });
              del.addEventListener("blur", () => {
                armed = false;
                del.textContent = "Delete";
              });
              return h(
                "tr",
                { "data-reply": r.name },
                h("td", { text: r.name }),
                h("td", { class: "why sr-body", text: r.body }),
                h("td", { text: clock(r.updated_at) }),
                h(
                  "td",
                  {},
                  h(
                    "div",
                    { class: "buttons" },
                    h("button", { type: "button", text: "Edit", "aria-label": `Edit ${r.name}`, on: { click: () => edit(r) } }),
                    del,
                  ),
                ),
              );
            }),
          ),
        ),
      );
    } catch (e) {
      status.textContent = problem(e, "load the saved replies");
    }
  }

  mount(root, h("section", { class: "admin" }, h("h2", { text: "Saved replies" }), status, list, form));
  void load();
}
