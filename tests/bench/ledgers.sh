#!/usr/bin/env bash
# tests/bench/ledgers.sh: ledger ingestion throughput of rowlock over HTTP, beside the same SQL
# driven by pgbench against the same database in the same run (the ceiling rowlock can reach:
# its statements, its transactions, its round trips, without HTTP, JSON or the service around it).
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/ledgers.sh
#
# Two operations, each measured through rowlock (tests/bench/ledgers/load.py: CLIENTS threads,
# one keep-alive connection each, a request at a time) and through pgbench (-n -M prepared
# -c CLIENTS -j 2, scripts composed from tests/bench/ledgers/*.pgbench), each on its own fresh
# ledger:
#   checkpoints   POST /ledgers/L/checkpoints, sequences 1, 2, ... taken in turn by the clients:
#                 TXS (100) transactions of OBJECTS (10) object writes each, 1000 objects a
#                 checkpoint, plus one display update and EVENTS (2) events per transaction.
#                 Every checkpoint writes its own objects (fresh rows, version = its sequence):
#                 concurrent checkpoints never touch the same rows, so what is measured is
#                 ingestion, not lock waits. Rate: objects/s (objects written / elapsed).
#   transactions  POST /ledgers/L/transactions, one transaction of the same shape a request
#                 (OBJECTS fresh objects, no inputs, one display, EVENTS events). Rate:
#                 transactions/s.
# The pgbench scripts issue the statements rowlock issues, in its order and transactions
# (checkpoint_tx and check_tx/apply_tx in db/ledgers.c); the SQL text itself is taken from
# db/ledgers.c at every run (tests/bench/ledgers/compose.py), so it cannot drift, and pgbench's
# sessions get the settings of rowlock's pooled connections (db/pool.c). Whether the two
# did the same work is checked afterwards: the rows PostgreSQL counts inserted and updated in each
# ledger table, per checkpoint or transaction, must agree (the "same work" table).
#
# Besides the rates (target: rowlock's checkpoint ingestion at least 0.5 of pgbench's), the CPU
# time of each operation is reported (tests/bench/ledgers/cpu.py: rowlock's process, the
# PostgreSQL backends of the bench database, the client): per operation it hardly depends on
# what else the machine runs, unlike the rates on a small shared machine, and its ratio is the
# rate ratio to expect when both are CPU-bound. For a rowlock without handler workers (before
# ROWLOCK_WORKERS), so is how many of its MHD threads did work during each run: a connection
# stays with the thread that accepted it, which then served its connections' requests one at a
# time (a request blocked it while PostgreSQL worked), so fewer busy threads than CLIENTS meant
# fewer requests in progress than clients.
#
# Nothing lost: load.py finishes every request in flight when time is up, so the 2xx answers
# are exactly what rowlock committed. At the end the ledgers are counted in SQL: objects,
# executed transactions (by path), events, displays and checkpoints must equal what the 2xx
# answers (and pgbench's processed transactions) account for, exactly.
#
# PIN=1: PostgreSQL on CPU 0, everything else on CPU 1 (as in queues.sh; tests/bench/lib.sh).
# Environment: ROWLOCK_DATABASE_URL (required), DURATION (seconds per run, default 10), CLIENTS
# (concurrent clients of both, default 4), ROUNDS (each operation is measured ROUNDS times,
# alternating rowlock and pgbench; the best round of each is reported; default 3), WARMUP
# (seconds, default 2), THREADS (ROWLOCK_THREADS, default 8), POOL (ROWLOCK_POOL_SIZE, default
# 16), WORKERS (ROWLOCK_WORKERS, unset by default), TXS, OBJECTS, EVENTS (the checkpoint shape
# above), OPS (default "checkpoints transactions"), ROWLOCK_LOG_LEVEL (default info, so access
# logs are written, to a file), KEEP_LOGS=1 (keep that file, the load and pgbench outputs and the
# composed pgbench scripts; removed at exit otherwise), KEEP_LEDGERS=1 (keep the bench ledgers;
# dropped at exit otherwise), BUILD_DIR (default build), CC (the C preprocessor's driver for
# compose.py, default cc).
# Benchmarks report, they do not assert: the exit status is 0 whatever the ratios; non-zero when
# something could not be built, started or measured, or when the counts show work lost.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
readonly ROOT
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"
readonly HERE="$ROOT/tests/bench/ledgers"
readonly BUILD="${BUILD_DIR:-$ROOT/build}"
readonly THREADS="${THREADS:-8}" POOL="${POOL:-16}" CLIENTS="${CLIENTS:-4}"
readonly DURATION="${DURATION:-10}" ROUNDS="${ROUNDS:-3}" WARMUP="${WARMUP:-2}"
readonly TXS="${TXS:-100}" OBJECTS="${OBJECTS:-10}" EVENTS="${EVENTS:-2}"
readonly OPS="${OPS:-checkpoints transactions}"
readonly LOG_LEVEL="${ROWLOCK_LOG_LEVEL:-info}"
readonly KEEP_LOGS="${KEEP_LOGS:-0}" KEEP_LEDGERS="${KEEP_LEDGERS:-0}"
readonly PGBENCH_JOBS=2 TARGET=0.50

log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'ledgers.sh: error: %s\n' "$*" >&2
    exit 1
}

for v in THREADS POOL CLIENTS DURATION ROUNDS WARMUP TXS OBJECTS EVENTS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
[ "$CLIENTS" -ge "$PGBENCH_JOBS" ] || die "CLIENTS must be at least $PGBENCH_JOBS (pgbench -j)"
# rowlock's limits (db/ledgers.h): transactions a checkpoint, effects a transaction
if [ "$TXS" -gt 1000 ] || [ "$OBJECTS" -gt 1000 ] || [ "$EVENTS" -gt 1000 ]; then
    die "TXS, OBJECTS and EVENTS are at most 1000 (rowlock's limits)"
fi
for op in $OPS; do
    case $op in
    checkpoints | transactions) ;;
    *) die "unknown operation '$op' in OPS (checkpoints, transactions)" ;;
    esac
done

if [ -z "${ROWLOCK_DATABASE_URL:-}" ]; then
    cat >&2 <<'EOF'
ledgers.sh: error: ROWLOCK_DATABASE_URL is not set.
This bench runs rowlock and pgbench against the same PostgreSQL database, so it needs a database
rowlock may use (it applies or checks its schema at startup; the bench creates ledgers there and
drops them at exit). A fresh database is best, e.g. in a running cluster:
  psql "host=/path/to/sock user=rowlock dbname=postgres" -c 'create database rowlock_bench_l'
  ROWLOCK_DATABASE_URL='postgresql:///rowlock_bench_l?host=/path/to/sock&user=rowlock' \
      tests/bench/ledgers.sh
`deploy/local.sh run` starts a private cluster (.rowlock/pg) and prints its ROWLOCK_DATABASE_URL;
while it runs, that URL works from another shell.
EOF
    exit 1
fi
readonly DB_URL="$ROWLOCK_DATABASE_URL"

# ---------------------------------------------------------------------------------------------
# Tools and build

ensure_pg_tools pgbench psql
PGBENCH=$(pg_tool pgbench)
PSQL=$(pg_tool psql)
readonly PGBENCH PSQL
command -v python3 >/dev/null 2>&1 || die "python3 is missing (the load generator is Python)"
command -v curl >/dev/null 2>&1 || die "curl is missing; install it (apt-get install curl)"
command -v "${CC:-cc}" >/dev/null 2>&1 || die "${CC:-cc} is missing (compose.py preprocesses" \
    "db/ledgers.c with it)"

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    log "configuring $BUILD"
    cmake -S "$ROOT" -B "$BUILD" >&2 || die "cmake configure failed"
fi
log "building (cmake --build $BUILD --target rowlock)"
cmake --build "$BUILD" --target rowlock >&2 || die "build failed"
readonly ROWLOCK_BIN="$BUILD/rowlock"
[ -x "$ROWLOCK_BIN" ] || die "no $ROWLOCK_BIN after the build"

sql() { "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$DB_URL" -c "$1"; }
sql 'SELECT 1' >/dev/null || die "cannot connect to ROWLOCK_DATABASE_URL with psql"
# the statements can be found before anything starts
python3 "$HERE/compose.py" --source "$ROOT/db/ledgers.c" --template x --ledger-id 0 --list \
    >/dev/null || die "cannot read the SQL of db/ledgers.c"

# ---------------------------------------------------------------------------------------------
# rowlock

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rowlock-bench-ledgers.XXXXXX")"
readonly WORK
readonly ROWLOCK_LOG="$WORK/rowlock.log"
ROWLOCK_PID=""
LEDGER_IDS=()

# Drops the bench ledgers and their tables (rowlock has no DELETE /ledgers/L); rowlock must be
# stopped first, as its janitor visits every ledger.
# shellcheck disable=SC2317 # invoked by on_exit
drop_ledgers() {
    [ "${#LEDGER_IDS[@]}" -gt 0 ] && [ "$KEEP_LEDGERS" != 1 ] || return 0
    local id stmts=""
    for id in "${LEDGER_IDS[@]}"; do
        stmts+="DROP TABLE IF EXISTS rowlock.\"objects_$id\", rowlock.\"displays_$id\","
        stmts+=" rowlock.\"transactions_$id\", rowlock.\"events_$id\","
        stmts+=" rowlock.\"checkpoints_$id\"; DELETE FROM rowlock.ledgers WHERE id = $id; "
    done
    sql "BEGIN; $stmts COMMIT;" >/dev/null || log "could not drop the bench ledgers"
    LEDGER_IDS=()
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
on_exit() {
    pin_restore
    [ -z "${WATCH_PID:-}" ] || kill -TERM "$WATCH_PID" 2>/dev/null || true
    stop_server "$ROWLOCK_PID"
    ROWLOCK_PID=""
    drop_ledgers
    # At level info the log grows by every request's access line: not kept unless asked for.
    [ "$KEEP_LOGS" = 1 ] || rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# PIN=1: PostgreSQL on CPU 0, this script and what it starts from here on on CPU 1 (lib.sh)
[ "${PIN:-0}" = 0 ] || pin_postgres "$PSQL" "$DB_URL"

fail_server() {
    printf 'ledgers.sh: error: rowlock did not start or does not answer; the end of %s:\n' \
        "$ROWLOCK_LOG" >&2
    tail -n 5 "$ROWLOCK_LOG" >&2 || true
    exit 1
}

alive() { kill -0 "$ROWLOCK_PID" 2>/dev/null || fail_server; }

log "starting rowlock ($THREADS threads, pool of $POOL, log level $LOG_LEVEL, stderr to" \
    "$ROWLOCK_LOG)"
# Open (no tokens file). An unreachable database ends rowlock (and the run) after 10 s rather
# than its default 60 s.
# WORKERS, when set, is passed on as ROWLOCK_WORKERS (for builds that have handler workers).
[ -z "${WORKERS:-}" ] || export ROWLOCK_WORKERS="$WORKERS"
ROWLOCK_LISTEN_ADDRESS=127.0.0.1 ROWLOCK_PORT=0 ROWLOCK_THREADS="$THREADS" \
    ROWLOCK_POOL_SIZE="$POOL" ROWLOCK_LOG_LEVEL="$LOG_LEVEL" ROWLOCK_TOKENS_FILE="" \
    ROWLOCK_DB_STARTUP_WAIT_S="${ROWLOCK_DB_STARTUP_WAIT_S:-10}" \
    "$ROWLOCK_BIN" 2>"$ROWLOCK_LOG" &
ROWLOCK_PID=$!
PORT=$(wait_port "$ROWLOCK_PID") || fail_server
readonly PORT BASE="http://127.0.0.1:$PORT"
for ((i = 0; i < 100; i++)); do
    alive
    curl -fsS -o /dev/null "$BASE/healthz" 2>/dev/null && break
    sleep 0.1
done
curl -fsS -o /dev/null "$BASE/healthz" || fail_server

# The bench ledgers, made by rowlock (PUT), fresh: rl-* for rowlock, pg-* for pgbench.
TAG="bench-$$-$(date +%s)"
readonly TAG
declare -A LEDGER LEDGER_ID
for side in rl pg; do
    for op in $OPS; do
        name="$TAG-$side-$op"
        code=$(curl -sS -o "$WORK/put.json" -w '%{http_code}' -X PUT \
            -H 'Content-Type: application/json' -d '{}' "$BASE/ledgers/$name") ||
            die "PUT /ledgers/$name failed"
        [ "$code" = 201 ] || die "PUT /ledgers/$name answered $code: $(cat "$WORK/put.json")"
        id=$(sql "SELECT id FROM rowlock.ledgers WHERE name = '$name'")
        [[ $id =~ ^[0-9]+$ ]] || die "cannot find the id of ledger $name"
        LEDGER[$side.$op]=$name LEDGER_ID[$side.$op]=$id
        LEDGER_IDS+=("$id")
    done
done

# The pgbench scripts, on the pg-* ledgers' tables.
declare -A TEMPLATE=([checkpoints]=checkpoint.pgbench [transactions]=optimistic.pgbench)
for op in $OPS; do
    python3 "$HERE/compose.py" --source "$ROOT/db/ledgers.c" --template "$HERE/${TEMPLATE[$op]}" \
        --ledger-id "${LEDGER_ID[pg.$op]}" --define TXS="$TXS" --define OBJECTS="$OBJECTS" \
        --define EVENTS="$EVENTS" >"$WORK/$op.sql" || die "cannot compose the pgbench script of $op"
done

# Whether this rowlock runs handlers on workers of their own (ROWLOCK_WORKERS) or on the MHD
# thread that accepted the connection, where a request blocks the thread's other connections.
if grep -q ROWLOCK_WORKERS "$ROOT/service/config.c"; then HANDLER_WORKERS=1; else HANDLER_WORKERS=0; fi
readonly HANDLER_WORKERS

# pgbench's sessions get the settings rowlock gives its pooled connections (the SET statements
# of db/pool.c: plan_cache_mode above all, which decides whether PostgreSQL re-plans a statement
# at every execution), so both sides' statements are planned alike.
PG_SESSION=$(python3 "$HERE/compose.py" --session "$ROOT/db/pool.c" \
    --timeout-ms "${ROWLOCK_STATEMENT_TIMEOUT_MS:-5000}") ||
    die "cannot read the session settings of db/pool.c"
readonly PG_SESSION

# ---------------------------------------------------------------------------------------------
# Measurements

# The machine's busy and total CPU ticks (all cores; /proc/stat: idle and iowait are not busy).
machine_ticks() {
    awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' \
        /proc/stat
}

# busy_pct "B0 T0" "B1 T1": the machine's busy % between two machine_ticks
busy_pct() {
    local b0 t0 b1 t1
    read -r b0 t0 <<<"$1"
    read -r b1 t1 <<<"$2"
    awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.0f", (t > 0 ? 100 * b / t : 0) }'
}

# PostgreSQL titles its backends "postgres: [cluster_name: ]user database host state": those of
# this database and user are the ones rowlock and pgbench use (tests/bench/ledgers/cpu.py).
PG_PREFIX=$(sql "SELECT 'postgres: ' || CASE WHEN current_setting('cluster_name') = '' THEN ''
                 ELSE current_setting('cluster_name') || ': ' END || current_user || ' '
                 || current_database() || ' '")
readonly PG_PREFIX
WATCH_PID=""
# watch FILE [--pid PID]...: starts cpu.py, writing its line to FILE when stopped (unwatch)
watch() {
    local file=$1
    shift
    python3 "$HERE/cpu.py" --prefix "$PG_PREFIX" --thread MHD-worker "$@" >"$file" &
    WATCH_PID=$!
    sleep 0.3 # its first sample
}
unwatch() {
    kill -TERM "$WATCH_PID" 2>/dev/null || true
    wait "$WATCH_PID" || die "the CPU sampler (tests/bench/ledgers/cpu.py) failed"
    WATCH_PID=""
}
# field FILE NAME: NAME=value of cpu.py's line in FILE
field() { tr ' ' '\n' <"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }

# Per operation: what was sent (the next number to use) and what succeeded, summed over runs.
declare -A NEXT OK_TOTAL APPLIED_TOTAL PG_BASE PG_TOTAL
for op in $OPS; do
    NEXT[$op]=1 OK_TOTAL[$op]=0 APPLIED_TOTAL[$op]=0 PG_BASE[$op]=0 PG_TOTAL[$op]=0
done

# Per operation and round (NAME; pgbench's as pg-NAME): rate, rowlock's p50/p99 ms or pgbench's
# average latency, machine busy %, MHD workers that did work.
declare -A RATE P50 P99 LAT BUSY WORKERS
# CPU seconds summed over the measured rounds, per operation and side: service (rowlock), pg
# (its backends), client (load.py or pgbench); OPS_SUM the operations they did.
declare -A CPU_SUM OPS_SUM
for op in $OPS; do
    for k in rl.service rl.pg rl.client pg.pg pg.client; do CPU_SUM[$op.$k]=0; done
    OPS_SUM[$op.rl]=0 OPS_SUM[$op.pg]=0
done
add() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a + b }'; }

json_field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$@"; }
unit() { if [ "$1" = checkpoints ]; then echo objects/s; else echo transactions/s; fi; }

# run_rowlock OP SECONDS NAME: one load.py run; its figures go to the arrays under NAME.
run_rowlock() {
    local op=$1 secs=$2 name=$3 out m0 m1 ok failed
    local cpu="$WORK/cpu-rl-$op-$name.txt"
    alive
    watch "$cpu" --pid "$ROWLOCK_PID"
    m0=$(machine_ticks)
    out=$(python3 "$HERE/load.py" "$op" --port "$PORT" --ledger "${LEDGER[rl.$op]}" \
        --clients "$CLIENTS" --duration "$secs" --start "${NEXT[$op]}" --txs "$TXS" \
        --objects "$OBJECTS" --events "$EVENTS") || {
        printf '%s\n' "$out" >&2
        alive
        die "the load generator failed ($op, $name)"
    }
    m1=$(machine_ticks)
    unwatch
    alive
    printf '%s\n' "$out" >"$WORK/load-$op-$name.json"
    ok=$(json_field "$out" ok)
    failed=$(json_field "$out" failed)
    NEXT[$op]=$(json_field "$out" next)
    OK_TOTAL[$op]=$((OK_TOTAL[$op] + ok))
    APPLIED_TOTAL[$op]=$((APPLIED_TOTAL[$op] + $(json_field "$out" applied)))
    [ "$failed" -eq 0 ] || log "$op ($name): $failed requests failed, the first:" \
        "$(json_field "$out" first_error)"
    [ "$ok" -gt 0 ] || die "$op ($name): no request succeeded"
    RATE[$op.$name]=$(json_field "$out" rate)
    P50[$op.$name]=$(json_field "$out" p50_ms)
    P99[$op.$name]=$(json_field "$out" p99_ms)
    BUSY[$op.$name]=$(busy_pct "$m0" "$m1")
    WORKERS[$op.$name]=$(field "$cpu" threads)
    if [ "$name" != warmup ]; then
        OPS_SUM[$op.rl]=$((OPS_SUM[$op.rl] + ok + failed))
        CPU_SUM[$op.rl.service]=$(add "${CPU_SUM[$op.rl.service]}" "$(field "$cpu" pid_cpu_s)")
        CPU_SUM[$op.rl.pg]=$(add "${CPU_SUM[$op.rl.pg]}" "$(field "$cpu" backend_cpu_s)")
        CPU_SUM[$op.rl.client]=$(add "${CPU_SUM[$op.rl.client]}" "$(json_field "$out" cpu_s)")
    fi
    log "rowlock $op ($name): $ok ok, $failed failed, $(printf '%.0f' "${RATE[$op.$name]}")" \
        "$(unit "$op"), p50 ${P50[$op.$name]} ms, p99 ${P99[$op.$name]} ms; CPU s: rowlock" \
        "$(field "$cpu" pid_cpu_s), PostgreSQL $(field "$cpu" backend_cpu_s), client" \
        "$(json_field "$out" cpu_s); ${WORKERS[$op.$name]} MHD threads busy; machine" \
        "${BUSY[$op.$name]}% busy"
}

# run_pgbench OP SECONDS NAME: one pgbench run; its figures go to the arrays under pg-NAME.
run_pgbench() {
    local op=$1 secs=$2 name=$3 out tps processed failed m0 m1 pgb rc=0
    local cpu="$WORK/cpu-pg-$op-$name.txt" txt="$WORK/pgbench-$op-$name.txt"
    m0=$(machine_ticks)
    PGOPTIONS="$PG_SESSION ${PGOPTIONS:-}" \
        "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$PGBENCH_JOBS" -T "$secs" \
        -D ledger="${LEDGER[pg.$op]}" -D clients="$CLIENTS" -D base="${PG_BASE[$op]}" \
        -D n=0 -f "$WORK/$op.sql" "$DB_URL" >"$txt" 2>&1 &
    pgb=$!
    watch "$cpu" --pid "$pgb"
    wait "$pgb" || rc=$?
    m1=$(machine_ticks)
    sleep 0.2 # the backends' last moments
    unwatch
    out=$(cat "$txt")
    if [ "$rc" != 0 ]; then
        printf '%s\n' "$out" | tail -n 20 >&2
        die "pgbench failed ($op, $name)"
    fi
    tps=$(awk '/^tps = / { print $3; exit }' <<<"$out")
    processed=$(awk -F': ' '/^number of transactions actually processed/ { print $2 }' <<<"$out")
    processed=${processed%%/*}
    failed=$(awk '/^number of failed transactions/ { print $5 }' <<<"$out")
    LAT[$op.pg-$name]=$(awk '/^latency average = / { print $4 }' <<<"$out")
    if ! [[ $processed =~ ^[0-9]+$ ]] || [ -z "$tps" ]; then
        die "cannot read tps and processed transactions from pgbench ($op, $name): $out"
    fi
    [ "${failed:-0}" = 0 ] || log "pgbench $op ($name): $failed failed transactions"
    PG_TOTAL[$op]=$((PG_TOTAL[$op] + processed))
    # the next run's numbers start past every number this run may have used
    PG_BASE[$op]=$((PG_BASE[$op] + (processed + ${failed:-0} + 1) * CLIENTS))
    RATE[$op.pg-$name]=$(awk -v t="$tps" \
        -v k="$([ "$op" = checkpoints ] && echo $((TXS * OBJECTS)) || echo 1)" \
        'BEGIN { printf "%.2f", t * k }')
    BUSY[$op.pg-$name]=$(busy_pct "$m0" "$m1")
    if [ "$name" != warmup ]; then
        OPS_SUM[$op.pg]=$((OPS_SUM[$op.pg] + processed))
        CPU_SUM[$op.pg.pg]=$(add "${CPU_SUM[$op.pg.pg]}" "$(field "$cpu" backend_cpu_s)")
        CPU_SUM[$op.pg.client]=$(add "${CPU_SUM[$op.pg.client]}" "$(field "$cpu" pid_cpu_s)")
    fi
    log "pgbench $op ($name): $processed transactions, tps $tps," \
        "$(printf '%.0f' "${RATE[$op.pg-$name]}") $(unit "$op"), latency average" \
        "${LAT[$op.pg-$name]} ms; CPU s: PostgreSQL $(field "$cpu" backend_cpu_s), pgbench" \
        "$(field "$cpu" pid_cpu_s); machine ${BUSY[$op.pg-$name]}% busy"
}

for op in $OPS; do
    log "warming up $op (${WARMUP}s each: rowlock, pgbench)"
    run_rowlock "$op" "$WARMUP" warmup
    run_pgbench "$op" "$WARMUP" warmup
done
# Fresh tables have no statistics until autovacuum gets to them, and a plan made before that
# may differ from one made after (it is kept until the statistics change). The measured rounds
# start from analyzed tables on both sides.
for op in $OPS; do
    for side in rl pg; do
        id=${LEDGER_ID[$side.$op]}
        sql "ANALYZE rowlock.\"objects_$id\", rowlock.\"displays_$id\", rowlock.\"transactions_$id\",
             rowlock.\"events_$id\", rowlock.\"checkpoints_$id\"" >/dev/null ||
            die "cannot analyze the tables of ledger ${LEDGER[$side.$op]}"
    done
done
# Rounds alternate which side goes first, so neither always runs on the other's leftovers
# (dirty buffers, autovacuum, a checkpoint's full-page writes).
for ((r = 1; r <= ROUNDS; r++)); do
    for op in $OPS; do
        log "round $r: $op, ${DURATION}s each, $CLIENTS clients"
        if ((r % 2 == 1)); then
            run_rowlock "$op" "$DURATION" "$r"
            run_pgbench "$op" "$DURATION" "$r"
        else
            run_pgbench "$op" "$DURATION" "$r"
            run_rowlock "$op" "$DURATION" "$r"
        fi
    done
done

# Stopping rowlock closes its connections: PostgreSQL's table statistics of its backends are
# flushed, for the "same work" table below.
stop_server "$ROWLOCK_PID"
ROWLOCK_PID=""
# (their backends flush as they exit, a moment after the connections close)
for ((i = 0; i < 50; i++)); do
    [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
              AND application_name IN ('rowlock', 'pgbench')")" = 0 ] && break
    sleep 0.1
done
LOG_LINES=$(wc -l <"$ROWLOCK_LOG")
LOG_BYTES=$(wc -c <"$ROWLOCK_LOG")
LOG_WARN=$(grep -cE '"level":"(warn|error)"' "$ROWLOCK_LOG" || true)

# ---------------------------------------------------------------------------------------------
# Nothing lost: the ledgers counted in SQL against what was answered

VERIFY_FAILED=0
# counts SIDE OP: objects live, executed transactions (of path), all status rows, events (not
# holes), event holes, displays, checkpoints, (digest, index) pairs of events seen twice
counts() {
    local id=${LEDGER_ID[$1.$2]} path
    path=$([ "$2" = checkpoints ] && echo checkpoint || echo optimistic)
    sql "SELECT (SELECT count(*) FROM rowlock.\"objects_$id\" WHERE NOT deleted),
                (SELECT count(*) FROM rowlock.\"transactions_$id\" WHERE executed AND path = '$path'),
                (SELECT count(*) FROM rowlock.\"transactions_$id\"),
                (SELECT count(*) FROM rowlock.\"events_$id\" WHERE NOT hole),
                (SELECT count(*) FROM rowlock.\"events_$id\" WHERE hole),
                (SELECT count(*) FROM rowlock.\"displays_$id\"),
                (SELECT count(*) FROM rowlock.\"checkpoints_$id\"),
                (SELECT count(*) FROM (SELECT 1 FROM rowlock.\"events_$id\" WHERE NOT hole
                                       GROUP BY digest, index HAVING count(*) > 1) d)" |
        tr '|' ' '
}

# expect WHAT GOT WANT
expect() {
    if [ "$2" = "$3" ]; then
        printf '  %-58s %10s   ok\n' "$1" "$2"
    else
        printf '  %-58s %10s   WANT %s\n' "$1" "$2" "$3"
        VERIFY_FAILED=1
    fi
}

verify() {
    local side=$1 op=$2 n=$3 who=$4 o t all e holes d c dup
    read -r o t all e holes d c dup < <(counts "$side" "$op")
    echo "$who, ledger ${LEDGER[$side.$op]}:"
    if [ "$op" = checkpoints ]; then
        expect "checkpoints recorded (= $n committed)" "$c" "$n"
        expect "objects (= $n x $TXS x $OBJECTS)" "$o" "$((n * TXS * OBJECTS))"
        expect "transactions executed by checkpoint (= $n x $TXS)" "$t" "$((n * TXS))"
        expect "status rows (none left by a failed request)" "$all" "$((n * TXS))"
        expect "events (= $n x $TXS x $EVENTS)" "$e" "$((n * TXS * EVENTS))"
        expect "displays (= $n x $((TXS < 10 ? TXS : 10)))" "$d" "$((n * (TXS < 10 ? TXS : 10)))"
    else
        expect "transactions executed optimistically (= $n committed)" "$t" "$n"
        expect "status rows (none left by a failed request)" "$all" "$n"
        expect "objects (= $n x $OBJECTS)" "$o" "$((n * OBJECTS))"
        expect "events (= $n x $EVENTS)" "$e" "$((n * EVENTS))"
        expect "displays (= $n)" "$d" "$n"
    fi
    expect "events written twice" "$dup" 0
    [ "$holes" = 0 ] || echo "  ($holes event offsets are holes: offsets of rolled-back work)"
}

# ---------------------------------------------------------------------------------------------
# Same work: rows inserted and updated per operation in each ledger table, rowlock vs pgbench

# stats ID PER: "table ins upd" per table of ledger ID, divided by PER
stats() {
    sql "SELECT regexp_replace(relname, '_[0-9]+\$', ''), n_tup_ins, n_tup_upd
         FROM pg_stat_user_tables WHERE schemaname = 'rowlock'
         AND relname ~ '^(objects|displays|transactions|events|checkpoints)_$1\$' ORDER BY 1" |
        awk -F'|' -v n="$2" '{ printf "%s %.2f %.2f\n", $1, $2 / n, $3 / n }'
}

SAME_WORK=1
same_work() {
    local op=$1 rl pg
    rl=$(stats "${LEDGER_ID[rl.$op]}" "${OK_TOTAL[$op]}")
    pg=$(stats "${LEDGER_ID[pg.$op]}" "${PG_TOTAL[$op]}")
    echo "$op: rows a $([ "$op" = checkpoints ] && echo checkpoint || echo transaction)" \
        "(pg_stat_user_tables: inserted, updated), rowlock vs pgbench:"
    join <(printf '%s\n' "$rl") <(printf '%s\n' "$pg") | awk '
        { same = ($2 == $4 && $3 == $5); if (!same) bad = 1
          printf "  %-13s ins %9s upd %8s   |   ins %9s upd %8s   %s\n", $1, $2, $3, $4, $5,
              same ? "same" : "DIFFERENT" }
        END { exit bad }' || SAME_WORK=0
}

# ---------------------------------------------------------------------------------------------
# Report

# best OP PREFIX: the round with the highest rate
best() {
    local op=$1 prefix=$2 r b=1
    for ((r = 2; r <= ROUNDS; r++)); do
        awk -v a="${RATE[$op.$prefix$r]}" -v b="${RATE[$op.$prefix$b]}" \
            'BEGIN { exit !(a + 0 > b + 0) }' && b=$r
    done
    printf '%s\n' "$b"
}

echo
printf 'ledger ingestion: %s clients, %s s runs, best of %s rounds; rowlock %s threads, pool %s,' \
    "$CLIENTS" "$DURATION" "$ROUNDS" "$THREADS" "$POOL"
printf ' log level %s; %s cores\n' "$LOG_LEVEL" "$(nproc)"
printf 'a checkpoint: %s transactions x %s objects (+1 display update, %s events each);' \
    "$TXS" "$OBJECTS" "$EVENTS"
echo " every checkpoint and transaction writes its own fresh objects"
printf '%-25s %10s %10s %7s  %-13s %s\n' operation rowlock pgbench ratio target \
    "all rounds: rowlock | pgbench"
for op in $OPS; do
    rb=$(best "$op" "")
    pb=$(best "$op" "pg-")
    rounds_rl="" rounds_pg=""
    for ((r = 1; r <= ROUNDS; r++)); do
        rounds_rl+="$(printf '%.0f ' "${RATE[$op.$r]}")"
        rounds_pg+="$(printf ' %.0f' "${RATE[$op.pg-$r]}")"
    done
    if [ "$op" = checkpoints ]; then
        label="checkpoints (objects/s)" target=$TARGET
    else
        label="transactions (tx/s)" target=""
    fi
    awk -v l="$label" -v r="${RATE[$op.$rb]}" -v p="${RATE[$op.pg-$pb]}" -v t="$target" \
        -v rr="$rounds_rl" -v pr="$rounds_pg" 'BEGIN {
        ratio = p > 0 ? r / p : 0
        verdict = t == "" ? "" : ">= " t " " (ratio >= t ? "PASS" : "BELOW")
        printf "%-25s %10.0f %10.0f %7.3f  %-13s %s|%s\n", l, r, p, ratio, verdict, rr, pr }'
done
echo "rates: objects written (transactions applied) / elapsed; rowlock's clock runs from every"
echo "client connected to the last answer, pgbench's tps is without connection time (x" \
    "$((TXS * OBJECTS)) objects for checkpoints). pgbench runs rowlock's SQL without HTTP/JSON."
for op in $OPS; do
    rb=$(best "$op" "")
    pb=$(best "$op" "pg-")
    workers=""
    for ((r = 1; r <= ROUNDS; r++)); do workers+="${WORKERS[$op.$r]} "; done
    printf '%s, best rounds: rowlock p50 %s ms, p99 %s ms, machine %s%% busy; pgbench latency' \
        "$op" "${P50[$op.$rb]}" "${P99[$op.$rb]}" "${BUSY[$op.$rb]}"
    printf ' average %s ms, machine %s%% busy.' "${LAT[$op.pg-$pb]}" "${BUSY[$op.pg-$pb]}"
    if [ "$HANDLER_WORKERS" = 0 ]; then
        # handlers run on the MHD thread that accepted the connection
        printf ' rowlock MHD threads busy per round: %s(of %s connections: fewer means' \
            "$workers" "$CLIENTS"
        printf ' connections shared a thread and were served in turn)'
    fi
    printf '\n'
done
echo
echo "CPU per operation, ms (user+system, mean of the measured rounds; unlike the rates, hardly"
echo "changed by whatever else the machine runs): the rate ratio to expect when both are CPU-bound"
printf '%-14s %9s %11s %8s %8s | %11s %8s %8s | %s\n' "" "rowlock" "PostgreSQL" client total \
    "PostgreSQL" pgbench total "ratio"
for op in $OPS; do
    awk -v op="$op" -v n="${OPS_SUM[$op.rl]}" -v m="${OPS_SUM[$op.pg]}" \
        -v s="${CPU_SUM[$op.rl.service]}" -v p="${CPU_SUM[$op.rl.pg]}" \
        -v c="${CPU_SUM[$op.rl.client]}" -v q="${CPU_SUM[$op.pg.pg]}" \
        -v d="${CPU_SUM[$op.pg.client]}" 'BEGIN {
        if (n == 0 || m == 0) exit
        s = s / n * 1000; p = p / n * 1000; c = c / n * 1000; q = q / m * 1000; d = d / m * 1000
        printf "%-14s %9.2f %11.2f %8.2f %8.2f | %11.2f %8.2f %8.2f | %.3f\n", op, s, p, c,
            s + p + c, q, d, q + d, (s + p + c > 0 ? (q + d) / (s + p + c) : 0) }'
done
echo
echo "nothing lost (counted in SQL; rowlock: its 2xx answers, pgbench: its processed transactions):"
for op in $OPS; do
    verify rl "$op" "${OK_TOTAL[$op]}" "rowlock $op"
    if [ "$op" = checkpoints ]; then
        expect "transactions applied per the answers (= $((OK_TOTAL[$op] * TXS)))" \
            "${APPLIED_TOTAL[$op]}" "$((OK_TOTAL[$op] * TXS))"
    fi
    verify pg "$op" "${PG_TOTAL[$op]}" "pgbench $op"
done
echo
for op in $OPS; do same_work "$op"; done
[ "$SAME_WORK" = 1 ] || echo "  the pgbench scripts do not do rowlock's work: the ceiling is not comparable"
echo
echo "rowlock's stderr (JSON log at level $LOG_LEVEL) went to a file: $LOG_LINES lines," \
    "$LOG_BYTES bytes"
if [ "$LOG_WARN" -gt 0 ]; then
    echo "  $LOG_WARN warn/error lines, the first ones:"
    grep -E '"level":"(warn|error)"' "$ROWLOCK_LOG" | head -n 5 | sed 's/^/    /'
fi
if [ "$KEEP_LOGS" = 1 ]; then
    echo "  kept, with the load and pgbench outputs and the pgbench scripts, in $WORK"
else
    echo "  removed at exit with $WORK (KEEP_LOGS=1 keeps them)"
fi
[ "$VERIFY_FAILED" = 0 ] || die "the ledgers do not hold what was answered: work was lost or" \
    "duplicated (see above)"
exit 0
