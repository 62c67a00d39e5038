#!/usr/bin/env python3
"""tests/bench/resources.sh helper: PUT (or DELETE) resources one after another over one
keep-alive connection and report the time per request as their number grows.

    create.py PORT KIND PREFIX FROM TO [delete]

KIND is topics, ledgers or queues; names are PREFIX<i> for i in FROM..TO. Prints one JSON line:
{"count": n, "first_ms": mean ms of the first tenth, "last_ms": mean ms of the last tenth,
 "total_s": seconds, "errors": non-2xx answers}."""
import http.client
import json
import sys
import time

BODIES = {
    "topics": b"{}",
    "ledgers": b'{"tombstone_retention_seconds": 3600}',
    "queues": b'{"max_attempts": 3, "lease_seconds": 30}',
}


def main():
    port, kind, prefix, lo, hi = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    method = "DELETE" if len(sys.argv) > 6 and sys.argv[6] == "delete" else "PUT"
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
    times, errors = [], 0
    start = time.monotonic()
    for i in range(lo, hi + 1):
        t = time.monotonic()
        body = BODIES[kind] if method == "PUT" else None
        headers = {"Content-Type": "application/json"} if body else {}
        conn.request(method, "/%s/%s%d" % (kind, prefix, i), body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status >= 300:
            errors += 1
            if errors <= 3:
                sys.stderr.write("%s /%s/%s%d: %d\n" % (method, kind, prefix, i, resp.status))
        times.append((time.monotonic() - t) * 1000)
    tenth = max(1, len(times) // 10)
    print(json.dumps({
        "count": len(times),
        "first_ms": round(sum(times[:tenth]) / tenth, 2) if times else 0,
        "last_ms": round(sum(times[-tenth:]) / tenth, 2) if times else 0,
        "total_s": round(time.monotonic() - start, 2),
        "errors": errors,
    }))


if __name__ == "__main__":
    main()
