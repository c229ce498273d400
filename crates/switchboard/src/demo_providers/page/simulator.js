// The customer simulator page: sends messages through `POST /simulator/send` and polls
// `GET /api/calls` for what the fake providers and the fake alert sinks received.

const $ = (id) => document.getElementById(id);
const LABELS = { slack: "Slack", whatsapp: "WhatsApp", telegram: "Telegram", email: "Email" };
const SINKS = { "alert-slack": "Slack", "alert-pagerduty": "PagerDuty", "alert-webhook": "Webhook" };
const calls = [];
let after = 0;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

async function loadConfig() {
  const config = await (await fetch("/simulator/config")).json();
  $("console-link").href = config.console_url;
  $("channel").replaceChildren(...config.channels.map((c) => el("option", { value: c }, LABELS[c] ?? c)));
  $("target").replaceChildren(
    ...config.targets.map((t) => el("option", { value: t }, t === "lb" ? "the load balancer" : t)),
  );
  if (config.seed_error) $("result").textContent = config.seed_error;
}

function draw() {
  const box = $("channels");
  box.replaceChildren(
    ...["slack", "whatsapp", "telegram", "email"].map((kind) => {
      const mine = calls.filter((c) => c.kind === kind);
      return el(
        "article",
        { class: "channel", "data-channel": kind, "aria-label": `${LABELS[kind]} replies` },
        el("h3", {}, `${LABELS[kind]} — ${mine.length} call${mine.length === 1 ? "" : "s"}`),
        mine.length
          ? el(
              "ol",
              {},
              ...mine
                .slice(-30)
                .reverse()
                .map((c) =>
                  el(
                    "li",
                    { class: c.status >= 400 ? "failed" : "", "data-seq": String(c.seq) },
                    el("span", { class: "meta" }, `to ${c.to ?? "?"} · ${new Date(c.at).toLocaleTimeString()}${c.replayed ? " · repeat (deduplicated)" : ""}${c.status >= 400 ? ` · answered ${c.status}` : ""}`),
                    c.text ?? "",
                  ),
                ),
            )
          : el("p", { class: "empty" }, "No reply yet."),
      );
    }),
  );
}

// What the three alert sinks received, newest first: time, sink, trigger/resolve, kind, summary.
function drawAlerts() {
  const mine = calls.filter((c) => c.kind in SINKS).slice(-100).reverse();
  if (!mine.length) {
    $("alerts").replaceChildren(el("p", { class: "empty" }, "No alert yet."));
    return;
  }
  const header = el("tr", {}, ...["Time", "Sink", "Event", "Kind", "Summary"].map((t) => el("th", { scope: "col" }, t)));
  const rows = mine.map((c) => {
    const a = c.alert ?? {};
    const answered = c.status >= 400 ? ` (answered ${c.status})` : "";
    return el(
      "tr",
      { class: `${a.action ?? ""} ${c.status >= 400 ? "failed" : ""}`, "data-seq": String(c.seq), "data-sink": c.kind },
      el("td", {}, new Date(c.at).toLocaleTimeString()),
      el("td", {}, SINKS[c.kind]),
      el("td", { class: "action" }, `${a.action ?? "refused"}${answered}`),
      el(
        "td",
        {},
        a.kind ?? "?",
        a.scope ? el("span", { class: "meta" }, `${a.scope}${a.severity ? ` · ${a.severity}` : ""}`) : "",
      ),
      el("td", {}, a.summary ?? c.text ?? ""),
    );
  });
  $("alerts").replaceChildren(
    el(
      "table",
      {},
      el("caption", {}, `${mine.length} alert call${mine.length === 1 ? "" : "s"}, newest first`),
      el("thead", {}, header),
      el("tbody", {}, ...rows),
    ),
  );
}

async function poll() {
  try {
    const page = await (await fetch(`/api/calls?after=${after}`)).json();
    if (page.latest < after) calls.length = 0; // the demo process restarted
    for (const c of page.calls) calls.push(c);
    after = page.latest;
    if (page.calls.length) {
      draw();
      drawAlerts();
    }
  } catch {
    // The demo process is restarting; try again.
  }
  setTimeout(poll, 1000);
}

$("send").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = {
    channel: $("channel").value,
    customer: $("customer").value,
    text: $("text").value,
    target: $("target").value,
  };
  $("result").textContent = "Sending…";
  try {
    const answer = await (
      await fetch("/simulator/send", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    ).json();
    $("result").textContent = answer.error
      ? `Not sent: ${answer.error}`
      : `Switchboard answered ${answer.status}${answer.served_by ? ` (${answer.served_by})` : ""}: ${answer.answer}`;
  } catch (e) {
    $("result").textContent = `Not sent: ${e.message}`;
  }
});

for (const node of document.querySelectorAll(".demo-url")) node.textContent = location.origin;
draw();
drawAlerts();
loadConfig();
poll();
