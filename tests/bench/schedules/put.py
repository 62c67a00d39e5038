#!/usr/bin/env python3
"""tests/bench/schedules.sh helper: PUT (or DELETE) schedules one after another over one
keep-alive connection.

    put.py PORT PREFIX FROM TO BODY      PUT /schedules/PREFIX<i> with BODY (JSON text)
    put.py PORT PREFIX FROM TO delete    DELETE them

for i in FROM..TO. Prints one JSON line: {"count": n, "total_s": seconds, "errors": answers that
were not 2xx}; exits 1 when there was any."""
import http.client
import json
import sys
import time


def main():
    port, prefix, lo, hi, body = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    method = "DELETE" if body == "delete" else "PUT"
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
    errors = 0
    start = time.monotonic()
    for i in range(lo, hi + 1):
        data = body.encode() if method == "PUT" else None
        headers = {"Content-Type": "application/json"} if data else {}
        conn.request(method, "/schedules/%s%d" % (prefix, i), body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read()
        if resp.status >= 300:
            errors += 1
            if errors <= 3:
                sys.stderr.write("%s /schedules/%s%d: %d %s\n" % (method, prefix, i, resp.status, text[:200]))
    print(json.dumps({"count": hi - lo + 1, "total_s": round(time.monotonic() - start, 2), "errors": errors}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
