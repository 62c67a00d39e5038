#!/usr/bin/env python3
"""tests/bench/ledgers/cpu.py: the CPU time PostgreSQL backends spend during a run, for
tests/bench/ledgers.sh.

    cpu.py --prefix 'postgres: USER DBNAME ' [--pid PID]... [--thread NAME]

Samples /proc until SIGTERM or SIGINT, then prints one line: "backends=N backend_cpu_s=S
pid_cpu_s=P threads=T": the CPU time (user+system) of the processes whose command line starts
with the prefix (PostgreSQL's backends of that user and database, as it titles them), from the
first sample to the last one (a backend that starts during the run is found within 100 ms and
counts from 0; one that ends counts up to its last sample, taken every 10 ms); the same of the
--pid processes (rowlock, or pgbench: one that ends counts up to its last sample); and how many
of their threads named --thread (e.g. MHD-worker) used CPU meanwhile. CPU per operation, unlike
elapsed time, is hardly changed by the other work a shared machine runs at the same time.
"""

import argparse
import os
import signal
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def ticks(pid):
    return ticks_path("/proc/%d" % pid)


def ticks_path(path):
    try:
        with open(path + "/stat", "rb") as f:
            stat = f.read().decode("latin-1")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def named_threads(pids, name):
    """/proc/PID/task/TID of the threads of pids whose name is name."""
    out = []
    for pid in pids if name else []:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            path = "/proc/%d/task/%s" % (pid, tid)
            try:
                with open(path + "/comm") as f:
                    if f.read().strip() == name:
                        out.append(path)
            except OSError:
                pass
    return out


def backends(prefix):
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(prefix):
            out.append(int(name))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--pid", type=int, action="append", default=[])
    ap.add_argument("--thread", default="", help="thread name (comm) to count busy threads of")
    a = ap.parse_args()
    prefix = a.prefix.encode()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    first, last = {}, {}
    pid0 = {p: ticks(p) or 0 for p in a.pid}
    pid1 = dict(pid0)
    threads0 = {t: ticks_path(t) for t in named_threads(a.pid, a.thread)}
    for p in backends(prefix):
        t = ticks(p)
        if t is not None:
            first[p] = last[p] = t
    scan = 0
    while True:
        if scan % 10 == 0:  # new backends, every 100 ms
            for p in backends(prefix):
                if p not in first:
                    first[p] = 0  # started during the run
                    last[p] = 0
        scan += 1
        for p in list(last):  # known backends, every 10 ms
            t = ticks(p)
            if t is not None:
                last[p] = t
        for p in a.pid:
            t = ticks(p)
            if t is not None:
                pid1[p] = t
        if stop:
            break
        time.sleep(0.01)
    busy = 0
    for path, t0 in threads0.items():
        t1 = ticks_path(path)
        busy += t1 is not None and t0 is not None and t1 > t0
    total = sum(last[p] - first[p] for p in last)
    print(
        "backends=%d backend_cpu_s=%.3f pid_cpu_s=%.3f threads=%d"
        % (len(last), total / HZ, sum(pid1[p] - pid0[p] for p in a.pid) / HZ, busy)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
