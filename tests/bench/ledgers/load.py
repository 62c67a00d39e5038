#!/usr/bin/env python3
"""tests/bench/ledgers/load.py: the HTTP load generator of tests/bench/ledgers.sh.

    load.py checkpoints  --port P --ledger L --clients C --duration S --start N
    load.py transactions --port P --ledger L --clients C --duration S --start N

C threads, each with its own keep-alive connection (plain sockets, HTTP/1.1), loop until S
seconds have passed: take the next number from one shared counter (N, N+1, ...), POST the body
of that number, read the answer. A request in flight when time is up is finished and counted,
never abandoned, so what the clients were answered is exactly what rowlock did: the bench
compares it with the database afterwards. The clock runs from the moment every thread is
connected to the last answer.

The work (the same transaction shape on both paths, every number writes its own rows):
  checkpoints   POST /ledgers/L/checkpoints {"sequence": n, "transactions": [...]}: --txs
                transactions (digest cp<n>-<i>), each writing --objects fresh objects
                (obj-<n>-<i>-<k>, version n, type Coin), one display update (type
                disp-<n>-<i mod 10>, version i+1: 10 display rows a checkpoint) and --events
                events. Concurrent checkpoints never touch the same rows.
  transactions  POST /ledgers/L/transactions, one transaction (digest opt-<n>), no inputs,
                --objects fresh objects (oobj-<n>-<k>, version 1), one display (odisp-<n>)
                and --events events.
Bodies are built once per run as a template with the number as a placeholder: the client spends
microseconds a request, so the load it can offer is not bounded by Python.

Prints one JSON object: ok (2xx answers), failed (any other answer, or none), statuses, applied
(sum of "applied" of checkpoint answers), first_error, seconds, next (the first number not
taken), objects (written by the 2xx answers), rate (objects/s for checkpoints, transactions/s
for transactions), p50_ms, p99_ms (request latency), cpu_s (this process's user+system CPU).
Exit status 0 when every request got an answer (whatever its status), 1 otherwise.
"""

import argparse
import itertools
import json
import socket
import sys
import threading
import time

SEQ = "@@SEQ@@"  # placeholder of the number in a body template
SEQ_NUM = '"@@SEQNUM@@"'  # ...where it stands as a JSON number


def compact(obj):
    return json.dumps(obj, separators=(",", ":"))


def tx_template(digest, ids, version, display, events):
    return {
        "digest": digest,
        "writes": [
            {
                "object_id": oid,
                "version": version,
                "type": "Coin",
                "data": {"value": k, "owner": "owner-" + digest},
            }
            for k, oid in enumerate(ids)
        ],
        "displays": [display],
        "events": [
            {"type": "Transferred", "data": {"tx": digest, "n": j}} for j in range(events)
        ],
    }


def checkpoint_template(txs, objects, events):
    out = []
    for i in range(txs):
        digest = "cp%s-%d" % (SEQ, i)
        ids = ["obj-%s-%d-%d" % (SEQ, i, k) for k in range(objects)]
        display = {
            "type": "disp-%s-%d" % (SEQ, i % 10),
            "version": i + 1,
            "data": {"name": "display %d" % i},
        }
        out.append(tx_template(digest, ids, SEQ_NUM.strip('"'), display, events))
    return compact({"sequence": SEQ_NUM.strip('"'), "transactions": out})


def transaction_template(objects, events):
    digest = "opt-%s" % SEQ
    ids = ["oobj-%s-%d" % (SEQ, k) for k in range(objects)]
    display = {"type": "odisp-%s" % SEQ, "version": 1, "data": {"name": "display"}}
    return compact(tx_template(digest, ids, 1, display, events))


def render(template, n):
    s = str(n)
    return template.replace(SEQ_NUM, s).replace(SEQ, s).encode()


class Conn:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:port."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = b""

    def connect(self):
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by rowlock")
        self.buf += chunk

    def post(self, path, body):
        """POSTs body; returns (status, response body bytes)."""
        if self.sock is None:
            self.connect()
        head = (
            "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (path, len(body))
        ).encode()
        self.sock.sendall(head + body)
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        header, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
            elif name == "transfer-encoding":
                raise ConnectionError("unexpected Transfer-Encoding: %s" % value.strip())
        while len(self.buf) < length:
            self._fill()
        data, self.buf = self.buf[:length], self.buf[length:]
        if close:
            self.close()
        return status, data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("op", choices=["checkpoints", "transactions"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--start", type=int, default=1)
    ap.add_argument("--txs", type=int, default=100)
    ap.add_argument("--objects", type=int, default=10)
    ap.add_argument("--events", type=int, default=2)
    ap.add_argument(
        "--stagger-ms",
        type=float,
        default=0,
        help="open the connections this far apart (default 0: all at once, as a pool would)",
    )
    a = ap.parse_args()

    if a.op == "checkpoints":
        template = checkpoint_template(a.txs, a.objects, a.events)
        path = "/ledgers/%s/checkpoints" % a.ledger
        per_ok = a.txs * a.objects
    else:
        template = transaction_template(a.objects, a.events)
        path = "/ledgers/%s/transactions" % a.ledger
        per_ok = a.objects
    json.loads(render(template, a.start))  # the template renders to valid JSON

    counter = itertools.count(a.start)
    lock = threading.Lock()
    connected = threading.Barrier(a.clients + 1)
    go = threading.Barrier(a.clients + 1)
    res = {"ok": 0, "failed": 0, "statuses": {}, "applied": 0, "first_error": None}
    latencies = []
    broken = []
    t_end = [0.0]
    deadline = [0.0]

    def worker(index):
        conn = Conn(a.port)
        mine, ok, failed, applied, statuses, err = [], 0, 0, 0, {}, None
        time.sleep(index * a.stagger_ms / 1000)
        try:
            conn.connect()
        except OSError as e:
            broken.append("connect: %s" % e)
        connected.wait()
        go.wait()
        while not broken and time.monotonic() < deadline[0]:
            n = next(counter)
            body = render(template, n)
            t0 = time.monotonic()
            try:
                status, data = conn.post(path, body)
            except (OSError, ValueError, IndexError) as e:
                broken.append("request %d: %s" % (n, e))
                failed += 1
                break
            mine.append(time.monotonic() - t0)
            statuses[status] = statuses.get(status, 0) + 1
            if 200 <= status < 300:
                ok += 1
                if a.op == "checkpoints":
                    applied += json.loads(data).get("applied", 0)
            else:
                failed += 1
                if err is None:
                    err = "%d %s" % (status, data[:300].decode("utf-8", "replace"))
        conn.close()
        now = time.monotonic()
        with lock:
            t_end[0] = max(t_end[0], now)
            res["ok"] += ok
            res["failed"] += failed
            res["applied"] += applied
            for s, c in statuses.items():
                res["statuses"][str(s)] = res["statuses"].get(str(s), 0) + c
            if res["first_error"] is None:
                res["first_error"] = err
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    connected.wait()
    # the clock starts once every thread is connected: they are released together
    cpu0 = time.process_time()
    t_start = time.monotonic()
    deadline[0] = t_start + a.duration
    go.wait()
    for t in threads:
        t.join()
    cpu = time.process_time() - cpu0
    seconds = max(t_end[0] - t_start, 1e-9)
    latencies.sort()

    def pct(p):
        if not latencies:
            return 0.0
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    taken = next(counter)
    res.update(
        {
            "op": a.op,
            "seconds": round(seconds, 3),
            "next": taken,
            "objects": res["ok"] * per_ok,
            "rate": (res["ok"] * per_ok if a.op == "checkpoints" else res["ok"]) / seconds,
            "p50_ms": round(pct(0.50), 2),
            "p99_ms": round(pct(0.99), 2),
            "cpu_s": round(cpu, 3),
            "body_bytes": len(render(template, a.start)),
        }
    )
    if broken:
        res["first_error"] = broken[0]
    print(json.dumps(res))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
