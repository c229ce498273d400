// Screens for org admins: channel connections (create with secrets, see the webhook URL to
// give the provider, delete), dead letters (why, retry) and the inbox's parked events
// (inspect, replay). An endpoint this server does not have yet answers 404, and the screen
// says so instead of failing.

import { ApiError } from "../api";
import { h, mount, submitForm } from "../dom";
import { connections, deadLetters, inboundEvents } from "../endpoints";
import { CHANNEL_LABEL, clock, shortId } from "../format";
import type { Channel, Schemas } from "../types";

const SECRET_FIELDS: Record<Channel, string[]> = {
  slack: ["signing_secret", "bot_token"],
  whatsapp: ["account_sid", "auth_token", "from_number"],
  telegram: ["bot_token", "secret_token"],
  email: ["webhook_secret", "api_key", "from_address"],
};

function problem(e: unknown, what: string): string {
  if (e instanceof ApiError && e.status === 404 && e.message.includes("route")) {
    return `This server does not offer ${what} yet.`;
  }
  if (e instanceof ApiError && e.status === 403) return `Only an admin of this org can see ${what}.`;
  return `Could not load ${what}: ${(e as Error).message}`;
}

function table(caption: string, head: string[], rows: HTMLElement[]): HTMLElement {
  return h(
    "table",
    { class: "grid" },
    h("caption", { class: "visually-hidden", text: caption }),
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col", text: c })))),
    h("tbody", {}, rows),
  );
}

export function connectionsScreen(root: HTMLElement, orgId: string): void {
  const status = h("p", { role: "status", class: "status-line" });
  const list = h("div", { class: "admin-list" });
  const created = h("div", { class: "created", "aria-live": "polite" });

  const channel = h(
    "select",
    { id: "conn-channel", on: { change: () => renderSecrets() } },
    (Object.keys(CHANNEL_LABEL) as Channel[]).map((c) => h("option", { value: c, text: CHANNEL_LABEL[c] })),
  );
  const name = h("input", { id: "conn-name", required: true, maxlength: "200" });
  const secrets = h("fieldset", { class: "secrets" });
  const settings = h("textarea", { id: "conn-settings", rows: 2, value: "{}" });
  const formError = h("p", { class: "form-error", role: "alert" });

  function renderSecrets(): void {
    mount(
      secrets,
      h("legend", { text: "Secrets (stored encrypted, never shown again)" }),
      SECRET_FIELDS[channel.value as Channel].map((field) =>
        h(
          "div",
          { class: "field" },
          h("label", { for: `secret-${field}`, text: field }),
          h("input", { id: `secret-${field}`, name: field, required: true, autocomplete: "off", spellcheck: "false" }),
        ),
      ),
    );
  }

  const form = submitForm(
    {
      class: "admin-form",
      "aria-label": "New channel connection",
    },
    formError,
    async () => {
      let parsedSettings: unknown;
      try {
        parsedSettings = JSON.parse(settings.value || "{}");
      } catch {
        formError.textContent = "Settings must be JSON, e.g. {}";
        return;
      }
      const values: Record<string, string> = {};
      for (const input of secrets.querySelectorAll("input")) values[input.name] = input.value;
      try {
        const c = await connections.create({
          org_id: orgId,
          channel: channel.value,
          name: name.value.trim(),
          secrets: values,
          settings: parsedSettings,
        });
        form.reset();
        settings.value = "{}";
        renderSecrets();
        mount(
          created,
          h("p", {}, `Created ${CHANNEL_LABEL[c.channel]} connection “${c.name}”. Give the provider this webhook URL:`),
          h("code", { class: "webhook", text: c.webhook_url }),
        );
        void load();
      } catch (e) {
        formError.textContent = `Could not create it: ${(e as Error).message}`;
      }
    },
    h("h3", { text: "New connection" }),
    h("div", { class: "field" }, h("label", { for: "conn-channel", text: "Channel" }), channel),
    h("div", { class: "field" }, h("label", { for: "conn-name", text: "Name" }), name),
    secrets,
    h("div", { class: "field" }, h("label", { for: "conn-settings", text: "Settings (JSON)" }), settings),
    formError,
    h("button", { type: "submit", class: "primary", text: "Create connection" }),
  );
  renderSecrets();

  async function load(): Promise<void> {
    try {
      const page = await connections.list(orgId);
      status.textContent = `${page.items.length} connection${page.items.length === 1 ? "" : "s"}`;
      mount(
        list,
        table(
          "Channel connections",
          ["Channel", "Name", "Webhook URL", "Created", ""],
          page.items.map((c) => {
            const del = h("button", { type: "button", class: "danger", text: "Delete" });
            let armed = false;
            del.addEventListener("click", async () => {
              if (!armed) {
                armed = true;
                del.textContent = "Confirm delete";
                return;
              }
              try {
                await connections.remove(c.id);
                void load();
              } catch (e) {
                status.textContent = `Could not delete: ${(e as Error).message}`;
              }
            });
            del.addEventListener("blur", () => {
              armed = false;
              del.textContent = "Delete";
            });
            return h(
              "tr",
              {},
              h("td", { text: CHANNEL_LABEL[c.channel] }),
              h("td", { text: c.name }),
              h("td", {}, h("code", { class: "webhook", text: c.webhook_url })),
              h("td", { text: clock(c.created_at) }),
              h("td", {}, del),
            );
          }),
        ),
      );
    } catch (e) {
      status.textContent = problem(e, "channel connections");
    }
  }

  mount(root, h("section", { class: "admin" }, h("h2", { text: "Channel connections" }), status, list, created, form));
  void load();
}

export function deadLettersScreen(root: HTMLElement, orgId: string): void {
  const status = h("p", { role: "status", class: "status-line" });
  const list = h("div", { class: "admin-list" });
  const filter = h(
    "select",
    { id: "dl-status", on: { change: () => void load() } },
    ["", "queued", "retrying", "dead", "resolved"].map((s) => h("option", { value: s, text: s || "All states" })),
  );

  let generation = 0;
  async function load(notice = ""): Promise<void> {
    const mine = ++generation;
    try {
      const state = (filter.value || undefined) as Schemas["DeadLetterStatus"] | undefined;
      const page = await deadLetters.list({ org_id: orgId, limit: 100, status: state });
      if (mine !== generation) return; // a newer filter's answer wins
      status.textContent = `${notice}${page.items.length}${page.next_cursor ? "+" : ""} dead letter${page.items.length === 1 ? "" : "s"}`;
      mount(
        list,
        table(
          "Dead letters",
          ["Channel", "State", "Why", "Attempts", "Next try", ""],
          page.items.map((d) =>
            h(
              "tr",
              {},
              h("td", { text: CHANNEL_LABEL[d.channel] ?? d.channel }),
              h("td", { text: d.status }),
              h("td", { class: "why", text: `${d.error}${d.provider_status ? ` (HTTP ${d.provider_status})` : ""}` }),
              h("td", { text: `${d.attempts} · ${d.retries} retries` }),
              h("td", { text: clock(d.next_attempt_at) }),
              h(
                "td",
                {},
                h("button", {
                  type: "button",
                  text: "Retry now",
                  disabled: d.status === "resolved" || d.status === "retrying",
                  on: {
                    click: async (e) => {
                      const b = e.currentTarget as HTMLButtonElement;
                      b.disabled = true;
                      let notice: string;
                      try {
                        await deadLetters.retry(d.id, `${d.status}|${d.retries}`);
                        notice = "Retry queued. ";
                      } catch (err) {
                        notice = `Could not retry: ${(err as Error).message}. `;
                      }
                      void load(notice);
                    },
                  },
                }),
              ),
            ),
          ),
        ),
      );
    } catch (e) {
      status.textContent = problem(e, "dead letters");
      list.replaceChildren();
    }
  }

  mount(
    root,
    h(
      "section",
      { class: "admin" },
      h("h2", { text: "Dead letters" }),
      h("p", { class: "muted", text: "Replies whose delivery failed after every retry. Retrying sends the same reply again." }),
      h("div", { class: "field inline" }, h("label", { for: "dl-status", text: "State" }), filter),
      status,
      list,
    ),
  );
  void load();
}

export function inboundScreen(root: HTMLElement, orgId: string): void {
  const status = h("p", { role: "status", class: "status-line" });
  const list = h("div", { class: "admin-list" });
  const detail = h("div", { class: "event-detail", "aria-live": "polite" });
  const filter = h(
    "select",
    { id: "ib-status", on: { change: () => void load() } },
    ["parked", "pending", "processing", "processed", ""].map((s) => h("option", { value: s, text: s || "All states" })),
  );

  async function inspect(id: string): Promise<void> {
    try {
      const e = await inboundEvents.get(id);
      mount(
        detail,
        h("h3", { text: `Event ${shortId(e.id)} · ${CHANNEL_LABEL[e.channel] ?? e.channel}` }),
        h("p", { text: `State ${e.status}, ${e.attempts} attempt(s)${e.last_error ? `, last error: ${e.last_error}` : ""}` }),
        h("pre", { class: "payload", tabIndex: 0, "aria-label": "Payload", text: JSON.stringify(e.payload, null, 2) }),
      );
    } catch (err) {
      mount(detail, h("p", { text: problem(err, "this event") }));
    }
  }

  let generation = 0;
  async function load(notice = ""): Promise<void> {
    const mine = ++generation;
    try {
      const state = (filter.value || undefined) as Schemas["InboundStatus"] | undefined;
      const page = await inboundEvents.list({ org_id: orgId, limit: 100, status: state });
      if (mine !== generation) return; // a newer filter's answer wins
      status.textContent = `${notice}${page.items.length}${page.next_cursor ? "+" : ""} event${page.items.length === 1 ? "" : "s"}`;
      mount(
        list,
        table(
          "Inbound events",
          ["Received", "Channel", "Provider id", "State", "Last error", ""],
          page.items.map((e) =>
            h(
              "tr",
              {},
              h("td", { text: clock(e.received_at) }),
              h("td", { text: CHANNEL_LABEL[e.channel] ?? e.channel }),
              h("td", {}, h("code", { text: e.dedup_key })),
              h("td", { text: `${e.status} (${e.attempts})` }),
              h("td", { class: "why", text: e.last_error ?? "" }),
              h(
                "td",
                { class: "buttons" },
                h("button", { type: "button", text: "Inspect", on: { click: () => void inspect(e.id) } }),
                h("button", {
                  type: "button",
                  text: "Replay",
                  disabled: e.status === "processing",
                  on: {
                    click: async () => {
                      let notice: string;
                      try {
                        await inboundEvents.replay(e.id, `${e.status}|${e.attempts}`);
                        notice = "Replay queued. ";
                      } catch (err) {
                        notice = `Could not replay: ${(err as Error).message}. `;
                      }
                      void load(notice);
                    },
                  },
                }),
              ),
            ),
          ),
        ),
      );
    } catch (e) {
      status.textContent = problem(e, "inbound events");
      list.replaceChildren();
    }
  }

  mount(
    root,
    h(
      "section",
      { class: "admin" },
      h("h2", { text: "Inbound events" }),
      h("p", { class: "muted", text: "Webhooks the server accepted. Parked events failed too often and wait for a replay." }),
      h("div", { class: "field inline" }, h("label", { for: "ib-status", text: "State" }), filter),
      status,
      list,
      detail,
    ),
  );
  void load();
}
