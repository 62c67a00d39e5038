#!/usr/bin/env bash
# tests/bench/lib.sh: what the bench scripts (http.sh, topics.sh, queues.sh, ledgers.sh) share,
# sourced by each of them: installing a missing tool, finding (or installing) the PostgreSQL client
# programs, binding pgbench expressions into SQL, reading back the port a server picked, stopping
# it, CPU time of a process, wrk latencies.
# Each function uses log and die, which every script defines with its own name in the messages.

apt_install() {
    log "installing the Debian package(s) $*"
    if [ "$(id -u)" -eq 0 ]; then
        { apt-get update -q && apt-get install -y -q "$@"; } >&2
    elif command -v sudo >/dev/null 2>&1; then
        { sudo apt-get update -q && sudo apt-get install -y -q "$@"; } >&2
    else
        return 1
    fi
}

# The newest PostgreSQL client program $1: /usr/lib/postgresql/<version>/bin/$1 (Debian's layout,
# which /usr/bin/$1 only wraps), else $1 on the PATH.
pg_tool() {
    local found f
    found=$(for f in /usr/lib/postgresql/*/bin/"$1"; do
        if [ -x "$f" ]; then printf '%s\n' "$f"; fi
    done | sort -V | tail -n 1)
    if [ -n "$found" ]; then
        printf '%s\n' "$found"
    else
        command -v "$1" 2>/dev/null
    fi
}

# Stops process $1 (TERM, then KILL if it lingers) and reaps it; nothing when $1 is empty.
stop_server() {
    local pid=$1 i
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# Prints the TCP port process $1 listens on, once it does. The benches start their servers on
# port 0: the kernel picks a free port, with no race between choosing and binding, and it is read
# back from /proc (the process's socket inodes, matched in its net/tcp table), whatever the log
# level.
wait_port() {
    local pid=$1 fd link hex i
    local -a inodes
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || return 1
        inodes=()
        for fd in /proc/"$pid"/fd/*; do
            link=$(readlink "$fd" 2>/dev/null) || continue
            [[ $link =~ ^socket:\[([0-9]+)\]$ ]] && inodes+=("${BASH_REMATCH[1]}")
        done
        # net/tcp: local_address is IP:PORT in hex, st 0A is LISTEN, the 10th field the inode.
        hex=$(awk -v list="${inodes[*]}" '
            BEGIN { n = split(list, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
            NR > 1 && $4 == "0A" && ($10 in want) { split($2, p, ":"); print p[2]; exit }' \
            /proc/"$pid"/net/tcp 2>/dev/null || true)
        if [ -n "$hex" ]; then
            printf '%d\n' "$((16#$hex))"
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# CPU time process $1 has used, user plus system, in clock ticks (/proc/PID/stat fields 14, 15;
# the command name in field 2 is cut off first, as it may hold spaces).
cpu_ticks() {
    local stat
    stat=$(cat /proc/"$1"/stat) || return 1
    awk '{ print $12 + $13 }' <<<"${stat##*) }"
}

# Converts a wrk latency (e.g. 812.00us, 3.41ms, 1.02s) to milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
        printf "%.2f", n }'
}

# Installs the PostgreSQL client programs named (pgbench, psql) when pg_tool finds none.
ensure_pg_tools() {
    local tool
    for tool in "$@"; do
        pg_tool "$tool" >/dev/null && continue
        log "$tool is not installed"
        # pgbench is in postgresql-client from PostgreSQL 16 on, in postgresql-contrib (the
        # server package) before that
        apt_install postgresql-client || true
        pg_tool "$tool" >/dev/null || apt_install postgresql-contrib || true
        pg_tool "$tool" >/dev/null ||
            die "$tool is missing; install postgresql-client (or postgresql-contrib) and run again"
    done
}

# bind TEXT [PARAM EXPRESSION]...: TEXT (an SQL statement) with each $n replaced by a pgbench
# expression; a parameter missing from TEXT is an error.
bind() {
    local text=$1 from to
    shift
    while [ $# -gt 0 ]; do
        from=$1 to=$2
        shift 2
        [[ $text == *"$from"* ]] || die "compose: no $from in a statement"
        text=${text//"$from"/"$to"}
    done
    printf '%s' "$text"
}

# PIN=1: the way a deployment runs, PostgreSQL on a core of its own. pin_postgres PSQL URL pins
# the cluster's postmaster (so every backend it starts from now on) and its running children to
# CPU PIN_PG_CPU (default 0), and this script (so rowlock, the workers, pgbench, node and every
# other program it starts from now on) to CPU PIN_REST_CPU (default 1), with taskset; the
# cluster's previous masks are put back by pin_restore (call it from the EXIT trap). It needs
# the postmaster's pid (its data directory readable here) and the right to set its affinity
# (root or the same user). On a cluster others use, pinning it slows them too: use a cluster of
# the bench's own. PIN_PM gets the postmaster's pid.
PIN_PM="" PIN_SAVED=()
pin_postgres() {
    local psql=$1 url=$2 dir pid mask
    local pg_cpu=${PIN_PG_CPU:-0} rest_cpu=${PIN_REST_CPU:-1}
    command -v taskset >/dev/null 2>&1 || die "PIN=1 needs taskset (apt-get install util-linux)"
    [ "$(nproc --all)" -ge 2 ] || die "PIN=1 needs 2 CPUs"
    dir=$("$psql" -X -At -d "$url" -c 'SHOW data_directory') || die "PIN=1: cannot ask the cluster"
    [ -r "$dir/postmaster.pid" ] || die "PIN=1: $dir/postmaster.pid is not readable here"
    PIN_PM=$(head -n 1 "$dir/postmaster.pid")
    for pid in "$PIN_PM" $(pgrep -P "$PIN_PM"); do
        mask=$(taskset -p "$pid" 2>/dev/null | sed 's/.*: //') || continue
        PIN_SAVED+=("$pid:$mask")
        taskset -a -p -c "$pg_cpu" "$pid" >/dev/null 2>&1 ||
            die "PIN=1: cannot set the affinity of PostgreSQL's process $pid"
    done
    taskset -p -c "$rest_cpu" $$ >/dev/null || die "PIN=1: cannot pin this script"
    log "PIN=1: PostgreSQL (postmaster $PIN_PM) on CPU $pg_cpu, everything else on CPU $rest_cpu"
}
pin_restore() {
    local s
    for s in "${PIN_SAVED[@]}"; do
        taskset -a -p "${s#*:}" "${s%%:*}" >/dev/null 2>&1 || true
    done
    # backends started while pinned inherited the pin: give the ones still running theirs back
    if [ -n "$PIN_PM" ] && [ "${#PIN_SAVED[@]}" -gt 0 ]; then
        for s in $(pgrep -P "$PIN_PM"); do
            taskset -a -p "${PIN_SAVED[0]#*:}" "$s" >/dev/null 2>&1 || true
        done
    fi
    PIN_SAVED=()
}

# wal_snapshot PSQL URL: the cluster's current WAL position (pg_current_wal_lsn) as a byte count.
wal_position() { "$1" -X -At -d "$2" -c "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"; }

# wal_records PGDATA FROM TO: what the cluster wrote between two WAL positions (byte counts),
# from pg_waldump --stats=record, as key=value: wal (bytes), fpi (bytes of full-page images),
# heap_ins (heap tuples inserted: INSERT records, MULTI_INSERT records counted as one each),
# heap_upd (non-HOT updates), heap_hot (HOT updates), heap_del, heap_lock (row locks written),
# idx_ins (B-tree leaf entries inserted), prune (heap pages pruned or vacuumed). Cluster-wide:
# everything any database of the cluster did meanwhile. Nothing when pg_waldump or pg_wal is
# not readable here, or when the span's WAL is gone (a checkpoint recycled it: said on stderr).
wal_records() {
    local dump stats
    dump=$(pg_tool pg_waldump) || return 0
    [ -r "$1/pg_wal" ] || return 0
    if ! stats=$("$dump" --stats=record -p "$1/pg_wal" \
        -s "$(printf '%X/%X' $(($2 >> 32)) $(($2 & 0xFFFFFFFF)))" \
        -e "$(printf '%X/%X' $(($3 >> 32)) $(($3 & 0xFFFFFFFF)))" 2>/dev/null); then
        echo "==> pg_waldump could not read the run's $(($3 - $2)) bytes of WAL (recycled by a" \
            "checkpoint?): its WAL figures are left out; raise the cluster's wal_keep_size" \
            "above that" >&2
        return 0
    fi
    printf '%s\n' "$stats" | awk -v w=$(($3 - $2)) '
        $1 ~ /^Heap\/INSERT/ || $1 == "Heap2/MULTI_INSERT" { ins += $2 }
        $1 ~ /^Heap\/UPDATE/ { upd += $2 }
        $1 ~ /^Heap\/HOT_UPDATE/ { hot += $2 }
        $1 == "Heap/DELETE" { del += $2 }
        $1 == "Heap/LOCK" || $1 == "Heap2/LOCK_UPDATED" { lock += $2 }
        $1 ~ /^Btree\/INSERT_(LEAF|POST)/ { idx += $2 }
        $1 ~ /^Heap2\/(PRUNE|VACUUM)/ { prune += $2 }
        $1 == "Total" { fpi = $5 }
        END { printf "wal=%d fpi=%d heap_ins=%d heap_upd=%d heap_hot=%d heap_del=%d heap_lock=%d idx_ins=%d prune=%d\n",
            w, fpi, ins, upd, hot, del, lock, idx, prune }'
}
