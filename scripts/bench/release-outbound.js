// Release driver for scripts/bench-outbound.sh: releases the items in ITEMS_FILE at a fixed
// rate (open loop: each release is sent on schedule whether or not earlier ones answered),
// alternating between the two pods, with the body `bench <item id>` so the fake provider's
// log names the item. Prints one JSON line: `scheduled` and `answered` ({item: epoch ms},
// for every release answered 200) and the error count.
// Usage: node release-outbound.js POD1_URL POD2_URL TOKEN RATE ITEMS_FILE
const http = require("http");
const fs = require("fs");

const [pod1, pod2, token, rateArg, itemsFile] = process.argv.slice(2);
const rate = Number(rateArg);
const items = fs.readFileSync(itemsFile, "utf8").split("\n").filter(Boolean);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function release(base, item) {
  return new Promise((resolve) => {
    const url = new URL(`/expert-queue/${item}/release`, base);
    const body = JSON.stringify({ body: `bench ${item}` });
    const req = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: {
          "Content-Type": "application/json",
          "Content-Length": Buffer.byteLength(body),
          Authorization: `Bearer ${token}`,
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      },
    );
    req.on("error", () => resolve(0));
    req.end(body);
  });
}

(async () => {
  const scheduled = {};
  const answered = {};
  let errors = 0;
  const start = performance.timeOrigin + performance.now() + 50;
  const interval = 1000 / rate;
  await Promise.all(
    items.map(
      (item, n) =>
        new Promise((resolve) => {
          const due = start + n * interval;
          setTimeout(async () => {
            const status = await release(n % 2 === 0 ? pod1 : pod2, item);
            if (status === 200) {
              scheduled[item] = due;
              answered[item] = performance.timeOrigin + performance.now();
            } else errors += 1;
            resolve();
          }, Math.max(0, due - (performance.timeOrigin + performance.now())));
        }),
    ),
  );
  console.log(JSON.stringify({ scheduled, answered, errors }));
})();
