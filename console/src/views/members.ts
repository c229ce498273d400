// The Members page for org admins (`#/admin/members`): who is in the org, with their role
// and status; invite someone (the link is shown to copy, whether or not it was mailed);
// pending invitations to revoke; change a role; deactivate or reactivate; remove, after a
// confirm dialog. The server refuses to leave the org without an active admin (409
// `last_admin`), and the page says so.

import { ApiError } from "../api";
import { h, mount, submitForm } from "../dom";
import { members } from "../endpoints";
import { confirmDialog } from "./confirm";
import { clock } from "../format";
import type { Schemas } from "../types";

type Member = Schemas["OrgMember"];

/** What to tell the admin when an action is refused. */
export function memberProblem(e: unknown, what: string): string {
  if (e instanceof ApiError) {
    if (e.code === "last_admin") return "The org must keep at least one active admin: make someone else admin first.";
    if (e.code === "already_member") return "That address is a member already.";
    if (e.status === 403) return `Only an admin of this org can ${what}.`;
    if (e.status === 422) return e.message;
  }
  return `Could not ${what}: ${(e as Error).message}`;
}

/** A member's status as the page shows it. */
export function memberStatus(m: Pick<Member, "deactivated_at" | "account_deactivated">): string {
  if (m.account_deactivated) return "Locked by an operator";
  return m.deactivated_at ? "Deactivated" : "Active";
}

export function membersScreen(root: HTMLElement, orgId: string, me: string): void {
  const status = h("p", { role: "status", class: "status-line", id: "members-status" });
  const list = h("div", { class: "admin-list" });
  const pending = h("div", { class: "admin-list", id: "invitations" });
  const invited = h("div", { class: "created", "aria-live": "polite", id: "invited" });
  const email = h("input", { id: "invite-email", type: "email", required: true, autocomplete: "off", maxlength: "254" });
  const role = h(
    "select",
    { id: "invite-role" },
    h("option", { value: "expert", text: "Expert" }),
    h("option", { value: "admin", text: "Admin" }),
  );
  const formError = h("p", { class: "form-error", role: "alert", id: "invite-error" });

  const form = submitForm(
    {
      class: "admin-form",
      "aria-labelledby": "invite-title",
    },
    formError,
    async () => {
      try {
        const answer = await members.invite(orgId, {
          email: email.value.trim(),
          role: role.value as Schemas["Role"],
        });
        form.reset();
        const link = h("input", {
          id: "invite-link",
          readonly: true,
          value: answer.link,
          "aria-label": "Invitation link",
          class: "copy-field",
        });
        const copy = h("button", {
          type: "button",
          id: "invite-copy",
          text: "Copy link",
          on: {
            click: async () => {
              link.select();
              try {
                await navigator.clipboard.writeText(answer.link);
                copy.textContent = "Copied";
              } catch {
                copy.textContent = "Select and copy the link";
              }
            },
          },
        });
        const sent: Record<Schemas["MailOutcome"], string> = {
          sent: `Invitation mailed to ${answer.invitation.email}.`,
          failed: `The mail to ${answer.invitation.email} could not be sent: give them this link.`,
          not_configured: `Mail is not set up on this server: give ${answer.invitation.email} this link.`,
        };
        mount(
          invited,
          h("p", { text: `${sent[answer.mail]} It works once, until ${clock(answer.invitation.expires_at)}.` }),
          h("div", { class: "copy-row" }, link, copy),
        );
        void load();
      } catch (e) {
        formError.textContent = memberProblem(e, "invite");
      }
    },
    h("h3", { id: "invite-title", text: "Invite a member" }),
    h("div", { class: "field" }, h("label", { for: "invite-email", text: "Email" }), email),
    h("div", { class: "field" }, h("label", { for: "invite-role", text: "Role" }), role),
    formError,
    h("button", { type: "submit", class: "primary", text: "Invite" }),
  );

  async function act(what: string, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
      await load(`Done: ${what}. `);
    } catch (e) {
      status.textContent = memberProblem(e, what);
    }
  }

  function row(m: Member): HTMLElement {
    const who = m.display_name ? `${m.display_name} <${m.email}>` : m.email;
    const roleSelect = h(
      "select",
      { "aria-label": `Role of ${m.email}`, "data-member": m.email, class: "member-role" },
      h("option", { value: "expert", text: "Expert", selected: m.role === "expert" }),
      h("option", { value: "admin", text: "Admin", selected: m.role === "admin" }),
    );
    roleSelect.addEventListener("change", () =>
      void act(`change the role of ${m.email}`, () =>
        members.setRole(orgId, m.user_id, { role: roleSelect.value as Schemas["Role"] }),
      ),
    );
    const toggle = m.deactivated_at
      ? h("button", {
          type: "button",
          text: "Reactivate",
          "aria-label": `Reactivate ${m.email}`,
          on: { click: () => void act(`reactivate ${m.email}`, () => members.reactivate(orgId, m.user_id)) },
        })
      : h("button", {
          type: "button",
          text: "Deactivate",
          "aria-label": `Deactivate ${m.email}`,
          on: {
            click: async () => {
              if (await confirmDialog(h("p", { text: `Deactivate ${m.email}? Their sessions end at once and they cannot log in to this org until reactivated.` }), "Deactivate", "member-confirm"))
                void act(`deactivate ${m.email}`, () => members.deactivate(orgId, m.user_id));
            },
          },
        });
    const remove = h("button", {
      type: "button",
      class: "danger",
      text: "Remove",
      "aria-label": `Remove ${m.email}`,
      on: {
        click: async () => {
          if (await confirmDialog(h("p", { text: `Remove ${m.email} from this org? Their sessions end at once.` }), "Remove", "member-confirm"))
            void act(`remove ${m.email}`, () => members.remove(orgId, m.user_id));
        },
      },
    });
    return h(
      "tr",
      { "data-member": m.email },
      h("td", { text: who + (m.user_id === me ? " (you)" : "") }),
      h("td", {}, roleSelect),
      h("td", { class: "member-status", text: memberStatus(m) }),
      h("td", { text: clock(m.joined_at) }),
      h("td", { class: "actions" }, toggle, remove),
    );
  }

  async function load(notice = ""): Promise<void> {
    try {
      const [all, open] = await Promise.all([members.list(orgId), members.invitations(orgId)]);
      status.textContent = `${notice}${all.members.length} member${all.members.length === 1 ? "" : "s"}, ${open.invitations.length} pending invitation${open.invitations.length === 1 ? "" : "s"}`;
      mount(
        list,
        h(
          "table",
          { class: "grid" },
          h("caption", { class: "visually-hidden", text: "Members" }),
          h("thead", {}, h("tr", {}, ["Member", "Role", "Status", "Joined", "Actions"].map((c) => h("th", { scope: "col", text: c })))),
          h("tbody", {}, all.members.map(row)),
        ),
      );
      mount(
        pending,
        open.invitations.length === 0
          ? null
          : h(
              "table",
              { class: "grid" },
              h("caption", { class: "visually-hidden", text: "Pending invitations" }),
              h("thead", {}, h("tr", {}, ["Email", "Role", "Expires", "Actions"].map((c) => h("th", { scope: "col", text: c })))),
              h(
                "tbody",
                {},
                open.invitations.map((i) =>
                  h(
                    "tr",
                    {},
                    h("td", { text: i.email }),
                    h("td", { text: i.role }),
                    h("td", { text: clock(i.expires_at) }),
                    h(
                      "td",
                      {},
                      h("button", {
                        type: "button",
                        text: "Revoke",
                        "aria-label": `Revoke the invitation of ${i.email}`,
                        on: { click: () => void act(`revoke the invitation of ${i.email}`, () => members.revokeInvitation(orgId, i.id)) },
                      }),
                    ),
                  ),
                ),
              ),
            ),
      );
    } catch (e) {
      status.textContent = memberProblem(e, "list the members");
    }
  }

  mount(
    root,
    h(
      "section",
      { class: "admin", "aria-labelledby": "members-title" },
      h("h2", { id: "members-title", text: "Members" }),
      status,
      list,
      h("h3", { text: "Pending invitations" }),
      pending,
      invited,
      form,
    ),
  );
  void load();
}
