// A fake Slack for scripts/bench-outbound.sh: answers chat.postMessage after DELAY_MS, with
// HTTP 503 for FAIL_PCT % of calls (chosen at random), and logs one line per call:
// `<epoch ms with µs> <status> <text>` (the bench puts the queue item id in the text).
// Usage: node fake-provider.js PORT DELAY_MS FAIL_PCT LOG_FILE
const http = require("http");
const fs = require("fs");

const [port, delayArg, failArg, logFile] = process.argv.slice(2);
const delay = Number(delayArg);
const failPct = Number(failArg);
const log = fs.createWriteStream(logFile, { flags: "a" });
let n = 0;

http
  .createServer((req, res) => {
    const at = performance.timeOrigin + performance.now();
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      let text = "";
      try {
        text = JSON.parse(body).text || "";
      } catch (_) {}
      const fail = Math.random() * 100 < failPct;
      const status = fail ? 503 : 200;
      log.write(`${at.toFixed(3)} ${status} ${text.replace(/\s+/g, "_")}\n`);
      setTimeout(() => {
        n += 1;
        const answer = fail
          ? { ok: false, error: "service_unavailable" }
          : { ok: true, channel: "C1", ts: `1700000000.${String(n).padStart(6, "0")}` };
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(answer));
      }, delay);
    });
  })
  .listen(Number(port), "127.0.0.1");
