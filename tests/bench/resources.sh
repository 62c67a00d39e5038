#!/usr/bin/env bash
# tests/bench/resources.sh: what the number of resources costs. One run measures, on
# a database of its own, every figure with 1 topic, ledger and queue and again with TOPICS
# topics, LEDGERS ledgers and QUEUES queues (created through the API), each beside its
# single-resource twin:
#   PUT time       mean ms per PUT of the first and of the last tenth created (flat or growing)
#   relations      relations in the rowlock schema (tables, indexes, sequences)
#   throughput     produce x1, PATCH of a new key, enqueue, claim (max_jobs 1): requests/s with
#                  every request on the same resource, then on a random one of N (wrk,
#                  tests/bench/resources/load.lua), each run after a warm-up of the same length
#   backend memory private memory (Anonymous of /proc/<pid>/smaps_rollup: the backend's own
#                  heap, its caches and plans) of each rowlock backend after the single-resource
#                  runs and after the random ones (max and sum over the backends), and beside it
#                  Private_Clean + Private_Dirty, which also counts the pages of shared_buffers
#                  that no other process has mapped yet (shared memory, not the backend's);
#                  needs to read the server's /proc (root or the postgres user, same host)
#   idle xact/s    transactions per second committed in the database (pg_stat_database
#                  xact_commit) while two rowlock processes are idle (janitors, nothing else),
#                  once the janitors have done the first upkeep of every new resource
#   /metrics       scrape time (the first of 3 and the best) and size
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/resources.sh
#
# Environment: ROWLOCK_DATABASE_URL (a database to connect to: the bench creates database
# BENCH_DB, default rowlock_resources_bench, next to it and drops it at exit unless KEEP=1),
# TOPICS (default 10000), LEDGERS (default 1000), QUEUES (default 1000), DURATION (seconds of a
# throughput run, default 10), WARMUP (default DURATION), IDLE_S (seconds of the idle sample,
# default 20), CONNECTIONS (wrk connections, default 4), POOL (ROWLOCK_POOL_SIZE, default 16),
# OPS (default "produce patch enqueue claim"), ROUNDS (default 1: with more, each operation is
# measured that many times on one resource and on a random one, the single one first in odd
# rounds and last in even ones, every figure reported with the ratio over all rounds),
# BUILD_DIR (default build), ROWLOCK_* settings
# pass through to both processes (e.g. ROWLOCK_DB_STATEMENT_CACHE, ROWLOCK_JANITOR_INTERVAL_MS).
# For a short run while developing: TOPICS=300 LEDGERS=30 QUEUES=30 DURATION=2 IDLE_S=6.
# Benchmarks report, they do not assert: exit 0 whatever the figures.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
readonly ROOT
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"
readonly HERE="$ROOT/tests/bench/resources"
readonly BUILD="${BUILD_DIR:-$ROOT/build}"
readonly TOPICS="${TOPICS:-10000}" LEDGERS="${LEDGERS:-1000}" QUEUES="${QUEUES:-1000}"
readonly DURATION="${DURATION:-10}"
readonly WARMUP="${WARMUP:-$DURATION}"
readonly IDLE_S="${IDLE_S:-20}"
readonly CONNECTIONS="${CONNECTIONS:-4}"
readonly POOL="${POOL:-16}"
readonly OPS="${OPS:-produce patch enqueue claim}"
readonly ROUNDS="${ROUNDS:-1}"
readonly BENCH_DB="${BENCH_DB:-rowlock_resources_bench}"
readonly KEEP="${KEEP:-0}"

log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'resources.sh: error: %s\n' "$*" >&2
    exit 1
}

for v in TOPICS LEDGERS QUEUES DURATION WARMUP IDLE_S CONNECTIONS POOL ROUNDS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
[[ $BENCH_DB =~ ^[a-z_][a-z0-9_]*$ ]] || die "BENCH_DB must be a plain lower-case name"
[ -n "${ROWLOCK_DATABASE_URL:-}" ] || die "ROWLOCK_DATABASE_URL is required"
[ -x "$BUILD/rowlock" ] || die "no $BUILD/rowlock: build first (or set BUILD_DIR)"
command -v wrk >/dev/null || apt_install wrk || die "wrk is missing"
command -v python3 >/dev/null || die "python3 is missing"
ensure_pg_tools psql
PSQL=$(pg_tool psql)
readonly PSQL

# The bench's database: ROWLOCK_DATABASE_URL with its database name replaced.
BENCH_URL=$(sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$BENCH_DB#" <<<"$ROWLOCK_DATABASE_URL")
readonly BENCH_URL
WORK=$(mktemp -d)
PID_A="" PID_B=""
cleanup() {
    stop_server "$PID_A"
    stop_server "$PID_B"
    if [ "$KEEP" != 1 ]; then
        "$PSQL" -X -q -d "$ROWLOCK_DATABASE_URL" -c "DROP DATABASE IF EXISTS $BENCH_DB" \
            >/dev/null 2>&1 || true
        rm -rf "$WORK"
    else
        log "kept database $BENCH_DB and $WORK"
    fi
}
trap cleanup EXIT

sql() { "$PSQL" -X -At -v ON_ERROR_STOP=1 -d "$BENCH_URL" -c "$1"; }

"$PSQL" -X -q -d "$ROWLOCK_DATABASE_URL" -c "DROP DATABASE IF EXISTS $BENCH_DB" >/dev/null
"$PSQL" -X -q -d "$ROWLOCK_DATABASE_URL" -c "CREATE DATABASE $BENCH_DB" >/dev/null ||
    die "cannot create database $BENCH_DB"

# start NAME: a rowlock process on the bench database, on a port the kernel picks.
start() {
    ROWLOCK_DATABASE_URL="$BENCH_URL" ROWLOCK_PORT=0 ROWLOCK_LISTEN_ADDRESS=127.0.0.1 \
        ROWLOCK_POOL_SIZE="$POOL" ROWLOCK_LOG_LEVEL="${ROWLOCK_LOG_LEVEL:-warn}" \
        "$BUILD/rowlock" >"$WORK/$1.log" 2>&1 &
    echo $!
}
PID_A=$(start a)
PORT_A=$(wait_port "$PID_A") || die "rowlock did not start: $(tail -n 5 "$WORK/a.log")"
PID_B=$(start b)
wait_port "$PID_B" >/dev/null || die "the second rowlock did not start"
readonly URL="http://127.0.0.1:$PORT_A"

# create KIND PREFIX FROM TO: PUTs, one JSON line of timings
create() { python3 "$HERE/create.py" "$PORT_A" "$@"; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

relations() { sql "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'rowlock'"; }

# Waits (up to a minute) until the janitors have no upkeep due: each new resource's first visit
# is work that is due, not idle load. Builds with the per-family upkeep tables (schema 10 to
# 12) are asked those; builds without either: a fixed 2 s.
settle() {
    local due i
    for ((i = 0; i < 600; i++)); do
        due=$(sql "SELECT count(*) FROM rowlock.upkeep WHERE family IN ('topics', 'ledgers') AND due_at <= now()" 2>/dev/null) ||
            due=$(sql "SELECT (SELECT count(*) FROM rowlock.topic_upkeep WHERE due_at <= now()) + (SELECT count(*) FROM rowlock.ledger_upkeep WHERE due_at <= now())" 2>/dev/null) || {
            sleep 2
            return
        }
        [ "$due" -eq 0 ] && return
        sleep 0.1
    done
    log "upkeep still due after a minute: $due resources"
}

# Transactions per second committed in the bench database over IDLE_S seconds, nothing sent.
idle_xacts() {
    local q="SELECT xact_commit FROM pg_stat_database WHERE datname = '$BENCH_DB'" a b
    settle
    # an idle backend reports its counts to pg_stat_database up to 10 s late (PostgreSQL's
    # PGSTAT_IDLE_INTERVAL): the first upkeep's transactions must not land in the sample
    sleep 11
    sql "SELECT pg_stat_clear_snapshot()" >/dev/null
    a=$(sql "$q")
    sleep "$IDLE_S"
    b=$(sql "$q")
    # the sampling's own transactions (this query twice) are taken off
    awk -v a="$a" -v b="$b" -v s="$IDLE_S" 'BEGIN { printf "%.1f", (b - a - 2) / s }'
}

# /metrics: the first of 3 scrapes in ms (it may count the queue gauges itself; the next ones
# answer with that count while it was slow: ROWLOCK_METRICS_SYNC_MS), the best, and the size
scrape() {
    local best="" first="" t size
    for _ in 1 2 3; do
        read -r t size < <(curl -s -o /dev/null -w '%{time_total} %{size_download}\n' "$URL/metrics")
        first=${first:-$t}
        best=$(awk -v a="$best" -v b="$t" 'BEGIN { if (a == "" || b < a) print b; else print a }')
    done
    awk -v f="$first" -v t="$best" -v s="$size" \
        'BEGIN { printf "%.0f ms first, %.0f ms best of 3, %.0f KB", f * 1000, t * 1000, s / 1024 }'
}

# Private memory of every rowlock backend of the bench database, MiB: "max X, sum Y (n)" of
# Anonymous, then the max of Private_Clean + Private_Dirty (shared_buffers pages included).
backend_memory() {
    local pid kb pv max=0 sum=0 n=0 pmax=0
    for pid in $(sql "SELECT pid FROM pg_stat_activity WHERE datname = '$BENCH_DB' AND application_name = 'rowlock' AND backend_type = 'client backend'"); do
        read -r kb pv < <(awk '/^Anonymous:/ { a += $2 } /^Private_(Clean|Dirty):/ { p += $2 }
            END { print a + 0, p + 0 }' /proc/"$pid"/smaps_rollup 2>/dev/null) || continue
        [ "${kb:-0}" -gt 0 ] || continue
        n=$((n + 1)) sum=$((sum + kb))
        [ "$kb" -gt "$max" ] && max=$kb
        [ "$pv" -gt "$pmax" ] && pmax=$pv
    done
    [ "$n" -gt 0 ] || { printf 'unreadable'; return; }
    awk -v m="$max" -v s="$sum" -v n="$n" -v p="$pmax" 'BEGIN { printf "max %.1f MiB, sum %.0f MiB (%d backends; Private_* max %.1f MiB)", m / 1024, s / 1024, n, p / 1024 }'
}

# rate OP N: requests/s of OP over random resources of N (N 1: one resource), after a warm-up
rate() {
    local op=$1 n=$2 prefix out non2xx
    case $op in produce | patch) prefix=rb-t ;; *) prefix=rb-q ;; esac
    # every wrk run its own keys (load.lua): a PATCH of a key a run before created is a no-op
    local tag
    tag=$(date +%s%N)
    wrk -t 2 -c "$CONNECTIONS" -d "${WARMUP}s" -s "$HERE/load.lua" "$URL" -- "$op" "$prefix" "$n" \
        "w$tag" >/dev/null
    out=$(wrk -t 2 -c "$CONNECTIONS" -d "${DURATION}s" -s "$HERE/load.lua" "$URL" -- "$op" "$prefix" \
        "$n" "r$tag")
    non2xx=$(awk '/^NON2XX/ { print $2 }' <<<"$out")
    [ "${non2xx:-0}" -eq 0 ] || log "$op over $n: $non2xx answers were not 2xx"
    awk '/^Requests\/sec:/ { printf "%.0f", $2 }' <<<"$out"
}

declare -A ONE MANY
log "1 topic, 1 ledger, 1 queue"
for k in topics:rb-t ledgers:rb-l queues:rb-q; do
    create "${k%%:*}" "${k#*:}" 1 1 >/dev/null
done
ONE[relations]=$(relations)
ONE[metrics]=$(scrape)
log "idle transactions, two processes, ${IDLE_S}s"
ONE[idle]=$(idle_xacts)

log "creating $TOPICS topics, $LEDGERS ledgers, $QUEUES queues"
for k in topics:rb-t:$TOPICS ledgers:rb-l:$LEDGERS queues:rb-q:$QUEUES; do
    IFS=: read -r kind prefix n <<<"$k"
    r=$(create "$kind" "$prefix" 2 "$n")
    ONE[put_$kind]="$(field "$r" first_ms) ms"
    MANY[put_$kind]="$(field "$r" last_ms) ms"
    log "$kind: $r"
done
MANY[relations]=$(relations)
MANY[metrics]=$(scrape)
log "idle transactions, two processes, ${IDLE_S}s"
MANY[idle]=$(idle_xacts)

log "throughput: ${WARMUP}s warm-up + ${DURATION}s each, $CONNECTIONS connections, $ROUNDS round(s)"
# ratios OP: "a random one / one resource" of OP in each round and over all rounds (the sum of
# the random runs' rates over the sum of the single ones'), as " (0.91x, 0.88x, all rounds 0.90x)"
ratios() {
    local op=$1 r out="" sa=0 sb=0
    for ((r = 1; r <= ROUNDS; r++)); do
        out+=$(awk -v a="${ONE[$op.$r]}" -v b="${MANY[$op.$r]}" 'BEGIN { if (a > 0) printf "%.2fx", b / a }')
        out+=", "
        sa=$((sa + ONE[$op.$r])) sb=$((sb + MANY[$op.$r]))
    done
    out+=$(awk -v a="$sa" -v b="$sb" 'BEGIN { if (a > 0) printf "all rounds %.2fx", b / a }')
    printf ' (%s)' "$out"
}
# one_run OP N R: the single-resource run of OP in round R
one_run() {
    ONE[$1.$3]=$(rate "$1" 1)
    log "$1 on one resource, round $3: ${ONE[$1.$3]}/s"
}
many_run() {
    MANY[$1.$3]=$(rate "$1" "$2")
    log "$1 on a random one of $2, round $3: ${MANY[$1.$3]}/s"
}
# Odd rounds run the single resource first, even rounds the random ones first, so that what
# drifts over a run (tables growing, autovacuum, the machine) does not favour one side.
for ((r = 1; r <= ROUNDS; r++)); do
    for op in $OPS; do
        case $op in produce | patch) n=$TOPICS ;; *) n=$QUEUES ;; esac
        if ((r % 2 == 1)); then
            one_run "$op" "$n" "$r"
            # before any random run
            [ -n "${ONE[memory]:-}" ] || ONE[memory]=$(backend_memory)
            many_run "$op" "$n" "$r"
        else
            many_run "$op" "$n" "$r"
            one_run "$op" "$n" "$r"
        fi
        ONE[$op]+="${ONE[$op]:+ / }${ONE[$op.$r]}" MANY[$op]+="${MANY[$op]:+ / }${MANY[$op.$r]}"
    done
done
MANY[memory]=$(backend_memory)
# per-resource counters (messages produced per topic...) have grown with the random runs
AFTER_METRICS=$(scrape)

printf '\n| what | 1 topic, ledger, queue | %s topics, %s ledgers, %s queues |\n|---|---|---|\n' \
    "$TOPICS" "$LEDGERS" "$QUEUES"
printf '| relations in the rowlock schema | %s | %s |\n' "${ONE[relations]}" "${MANY[relations]}"
for kind in topics ledgers queues; do
    printf '| PUT /%s/{name} (first / last tenth) | %s | %s |\n' "$kind" "${ONE[put_$kind]}" "${MANY[put_$kind]}"
done
for op in $OPS; do
    printf '| %s /s (one resource / a random one) | %s | %s%s |\n' "$op" "${ONE[$op]}" \
        "${MANY[$op]}" "$(ratios "$op")"
done
printf '| backend private memory (after the runs) | %s | %s |\n' "${ONE[memory]}" "${MANY[memory]}"
printf '| idle transactions/s, two processes | %s | %s |\n' "${ONE[idle]}" "${MANY[idle]}"
printf '| /metrics scrape | %s | %s (%s after the runs) |\n' "${ONE[metrics]}" "${MANY[metrics]}" \
    "$AFTER_METRICS"
