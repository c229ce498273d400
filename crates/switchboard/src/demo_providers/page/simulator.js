// The customer simulator page: sends messages through `POST /simulator/send` and polls
// `GET /api/calls` for what the fake providers received.

const $ = (id) => document.getElementById(id);
const LABELS = { slack: "Slack", whatsapp: "WhatsApp", telegram: "Telegram", email: "Email" };
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

async function poll() {
  try {
    const page = await (await fetch(`/api/calls?after=${after}`)).json();
    if (page.latest < after) calls.length = 0; // the demo process restarted
    for (const c of page.calls) calls.push(c);
    after = page.latest;
    if (page.calls.length) draw();
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

draw();
loadConfig();
poll();
