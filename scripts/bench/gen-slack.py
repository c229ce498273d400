#!/usr/bin/env python3
"""Writes N pre-signed Slack Events API webhooks as "ts<TAB>signature<TAB>body" lines (the
format of ../shared/bench/wrk/signed.lua). Unlike the baseline's generator, the events come
from USERS different customers (default 1000), as real traffic does, so the processing side
is not one conversation serialised on its row lock.

Usage: gen-slack.py N OUT.tsv SIGNING_SECRET [USERS]   (use the file within 300 s)
"""
import hashlib
import hmac
import json
import os
import sys
import time

n, out, secret = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
users = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
ts = str(int(time.time()))
tag = os.urandom(3).hex()
with open(out, "w") as f:
    for i in range(n):
        body = json.dumps({
            "type": "event_callback", "event_id": f"Ev{tag}{i}", "team_id": "T1",
            "event": {"type": "message", "user": f"U{i % users}", "text": f"hello {i}",
                      "channel": "C1", "ts": f"{ts}.{i:06d}"},
        }, separators=(",", ":"))
        sig = "v0=" + hmac.new(secret, f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
        f.write(f"{ts}\t{sig}\t{body}\n")
