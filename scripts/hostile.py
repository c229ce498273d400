#!/usr/bin/env python3
"""The hostile suite's client (run by scripts/hostile.sh): each abuse scenario from an
attacking address while an honest client on another address does its normal work, both
through the load balancer. Prints one line per scenario with what each side got, and exits
non-zero when the honest client was refused or slowed, or the attacker was served where it
should have been refused early.

Usage: hostile.py LB_URL SEED_JSON ATTACKER_ADDR HONEST_ADDR
"""

import hashlib
import hmac
import http.client
import json
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

LB, SEED, ATTACKER, HONEST = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
HOST = urlparse(LB).hostname
PORT = urlparse(LB).port
seed = json.load(open(SEED))
EXPERT = seed["expert"]
SLACK = seed["channels"]["slack"]
SLACK_PATH = urlparse(SLACK["webhook_url"]).path
SIGNING = SLACK["secrets"]["signing_secret"]
failures = []


def request(source, method, path, body=b"", headers=None):
    """One request from `source`; returns (status, headers, body, seconds)."""
    conn = http.client.HTTPConnection(HOST, PORT, timeout=30, source_address=(source, 0))
    started = time.monotonic()
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    elapsed = time.monotonic() - started
    conn.close()
    return response.status, dict(response.getheaders()), data, elapsed


def login(source, password, request_id=None):
    headers = {"content-type": "application/json"}
    if request_id:
        headers["x-request-id"] = request_id
    body = json.dumps({"email": EXPERT["email"], "password": password}).encode()
    return request(source, "POST", "/auth/login", body, headers)


def slack_event(n, secret=SIGNING):
    body = json.dumps({
        "type": "event_callback",
        "event_id": f"EvHostile{uuid.uuid4().hex}",
        "event": {"type": "message", "user": f"UH{n % 7}", "channel": "C1",
                  "text": f"honest message {n}", "ts": f"{time.time():.6f}"},
    }).encode()
    ts = str(int(time.time()))
    sig = "v0=" + hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body,
                            hashlib.sha256).hexdigest()
    return body, {"content-type": "application/json", "x-slack-request-timestamp": ts,
                  "x-slack-signature": sig}


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000 if values else None


def report(name, attacker, honest, honest_times, attacker_refused_early, honest_ok):
    line = (f"{name:<34} attacker {dict(Counter(attacker))}  honest {dict(Counter(honest))}"
            f"  honest p50 {percentile(honest_times, 0.5):.1f} ms"
            f" p99 {percentile(honest_times, 0.99):.1f} ms")
    print(line)
    if not attacker_refused_early:
        failures.append(f"{name}: the attacker was not refused early")
    if not honest_ok:
        failures.append(f"{name}: the honest client was refused or slowed")


def honest_slow(times):
    return percentile(times, 0.99) > 500


# A token for the honest client's REST calls, before any attack.
status, _, body, _ = login(HONEST, EXPERT["password"])
assert status == 200, f"the honest login works before the attacks ({status})"
TOKEN = json.loads(body)["token"]


def honest_me(n):
    return [request(HONEST, "GET", "/auth/me", headers={"authorization": f"Bearer {TOKEN}"})
            for _ in range(n)]


# 1. Lock a user out: wrong passwords for a known email from the attacking address.
attacker = [login(ATTACKER, "not the password")[0] for _ in range(15)]
honest = [login(HONEST, EXPERT["password"]) for _ in range(3)] + honest_me(10)
report("wrong passwords for a known email", attacker, [h[0] for h in honest],
       [h[3] for h in honest], attacker.count(429) >= 5,
       all(h[0] == 200 for h in honest) and not honest_slow([h[3] for h in honest]))

# 2. Silence a channel: unsigned (forged) webhooks to a real connection's URL.
with ThreadPoolExecutor(8) as pool:
    forged = pool.map(lambda n: request(ATTACKER, "POST", SLACK_PATH, *slack_event(n, "forged"))[0],
                      range(300))
    attacker = list(forged)
honest = [request(HONEST, "POST", SLACK_PATH, *slack_event(n)) for n in range(30)]
report("forged webhooks to a real URL", attacker, [h[0] for h in honest],
       [h[3] for h in honest], attacker.count(429) >= 200,
       all(h[0] == 200 for h in honest) and not honest_slow([h[3] for h in honest]))

# 3. Invented connection ids.
with ThreadPoolExecutor(8) as pool:
    attacker = list(pool.map(
        lambda _: request(ATTACKER, "POST", f"/webhooks/slack/{uuid.uuid4()}", b"{}",
                          {"content-type": "application/json"})[0], range(300)))
honest = [request(HONEST, "POST", SLACK_PATH, *slack_event(n)) for n in range(10)] + honest_me(10)
report("webhooks to invented connection ids", attacker, [h[0] for h in honest],
       [h[3] for h in honest], attacker.count(429) >= 200,
       all(h[0] == 200 for h in honest) and not honest_slow([h[3] for h in honest]))

# 4. A flood of logins (password hashing is the expensive part), in parallel.
with ThreadPoolExecutor(16) as pool:
    flood = pool.map(lambda _: login(ATTACKER, "not the password either")[0], range(200))
    honest = [login(HONEST, EXPERT["password"]) for _ in range(3)] + honest_me(10)
    attacker = list(flood)
report("a login flood", attacker, [h[0] for h in honest], [h[3] for h in honest],
       attacker.count(429) >= 100,
       all(h[0] == 200 for h in honest) and not honest_slow([h[3] for h in honest]))

# 5. A 10 KB request id: never echoed, never stored.
status, headers, _, _ = login(ATTACKER, "wrong", request_id="r" * 10_000)
echoed = headers.get("x-request-id", headers.get("X-Request-Id", ""))
kept_short = len(echoed) <= 64
print(f"{'a 10 KB X-Request-Id':<34} attacker got {status}, echoed id of {len(echoed)} characters")
if not kept_short:
    failures.append("a 10 KB X-Request-Id: echoed back")

# 6. Many REST calls from one address: the per-address default limit.
with ThreadPoolExecutor(16) as pool:
    attacker = list(pool.map(lambda _: request(ATTACKER, "GET", "/auth/me")[0], range(1500)))
honest = honest_me(20)
report("a REST flood", attacker, [h[0] for h in honest], [h[3] for h in honest],
       attacker.count(429) >= 200,
       all(h[0] == 200 for h in honest) and not honest_slow([h[3] for h in honest]))

if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("\nevery attack was refused early; the honest client was served throughout")
