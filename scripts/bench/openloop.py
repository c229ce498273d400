#!/usr/bin/env python3
"""Open-loop load at a fixed rate, free of coordinated omission.

Request i is *scheduled* at start + i/rate; its latency is measured from that scheduled
moment, so time spent waiting for a free connection (because the server is slow) counts,
as it would for a provider that keeps sending. Requests come from a TSV file written by
../shared/bench/wrk/gen-slack.js ("ts<TAB>signature<TAB>body"), so every event id is new.

Usage: openloop.py URL REQS.tsv RATE SECONDS [CONNECTIONS]
Prints one JSON object: rate, sent, ok, errors, p50/p90/p99/max in ms, achieved rate.
"""
import asyncio
import json
import sys
import time
from urllib.parse import urlsplit


async def worker(host, port, path, queue, results, start):
    reader, writer = await asyncio.open_connection(host, port)
    while True:
        item = await queue.get()
        if item is None:
            break
        scheduled, (ts, sig, body) = item
        data = body.encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"X-Slack-Request-Timestamp: {ts}\r\nX-Slack-Signature: {sig}\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        try:
            writer.write(head + data)
            await writer.drain()
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value.strip())
            if length:
                await reader.readexactly(length)
            status = int(status_line.split()[1])
        except Exception:  # a broken connection: count it and reconnect
            status = 0
            reader, writer = await asyncio.open_connection(host, port)
        results.append((time.perf_counter() - scheduled, status))
    writer.close()


def pct(sorted_values, p):
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, int(round(p / 100 * (len(sorted_values) - 1))))
    return round(sorted_values[i] * 1000, 2)


async def main():
    url, reqs_file, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    conns = int(sys.argv[5]) if len(sys.argv) > 5 else 64
    parts = urlsplit(url)
    reqs = [line.rstrip("\n").split("\t", 2) for line in open(reqs_file) if line.strip()]
    total = int(rate * seconds)
    if total > len(reqs):
        sys.exit(f"need {total} requests, file has {len(reqs)}")
    queue, results = asyncio.Queue(), []
    start = time.perf_counter()
    workers = [
        asyncio.create_task(worker(parts.hostname, parts.port, parts.path, queue, results, start))
        for _ in range(conns)
    ]
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait((scheduled, reqs[i]))
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - start
    lat = sorted(r[0] for r in results)
    ok = sum(1 for r in results if r[1] == 200)
    print(json.dumps({
        "rate": rate, "sent": len(results), "ok": ok, "errors": len(results) - ok,
        "achieved_rps": round(len(results) / elapsed, 1),
        "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90), "p99_ms": pct(lat, 99), "max_ms": pct(lat, 100),
    }))


asyncio.run(main())
