#!/usr/bin/env bash
# tests/bench/schedules.sh: what schedules cost, on a database of its own with PROCESSES (2)
# rowlock processes. Two measurements, each beside its baseline in the same run:
#   fire lag    DUE (1000) schedules `* * * * * *` due in the same second, every second for
#               DURATION seconds, against 1 schedule alone. Lag = schedule_fires.enqueued_at -
#               fire_at (the firing transaction's now(); its commit follows within the
#               transaction's duration): p50, p99 and max over every tick of the round; the
#               ticks fired against the ticks due (each side did all its work, none twice); and
#               for DUE the longest time from a tick's first enqueue to its last (what firing
#               DUE schedules takes, whatever the phase of the passes, which run every 200 ms
#               in each process). The schedules are unpaused in SQL, in one statement, so that
#               all their next ticks are the same second (PUTs one after another would anchor
#               them across seconds); a statement-level trigger the bench installs copies
#               every fire (the service trims the fire history to the newest few as it runs).
#   idle cost   while the processes are idle with FEW (100) and with MANY (10000) schedules
#               that are not due (`0 0 1 1 *`, created and deleted through the API between the
#               samples, then a VACUUM ANALYZE of the database, so that autovacuum stays out of
#               the sample): the
#               transactions a second the processes ran (rowlock_db_transactions_total of each
#               one's /metrics, commits and rollbacks: an idle firing pass finds nothing due and
#               rolls back); from pg_stat_database the database's transactions a second, and
#               from pg_stat_user_tables the rows of rowlock.schedules read a second
#               (seq_tup_read + idx_tup_fetch); with pg_stat_statements loaded
#               (shared_preload_libraries), its calls a second too.
# Each of ROUNDS (3) rounds measures both sides of both, the baseline first in odd rounds and
# last in even ones, so that what drifts over a run does not favour one side; every round is
# printed, with the ratios.
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/schedules.sh
#
# Environment: ROWLOCK_DATABASE_URL (a database to connect to: the bench creates database
# BENCH_DB, default rowlock_schedules_bench, next to it and drops it at exit unless KEEP=1),
# ROUNDS (3), DURATION (seconds of a lag round, 10), DUE (1000), FEW (100), MANY (10000),
# IDLE_S (seconds of an idle sample, 20), PROCESSES (2), POOL (ROWLOCK_POOL_SIZE, 16),
# BUILD_DIR (build); ROWLOCK_* settings pass through to the processes.
# For a short run while developing: ROUNDS=1 DURATION=3 DUE=200 MANY=1000 IDLE_S=3.
# Benchmarks report, they do not assert: exit 0 whatever the figures.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
readonly ROOT
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"
readonly HERE="$ROOT/tests/bench/schedules"
readonly BUILD="${BUILD_DIR:-$ROOT/build}"
readonly ROUNDS="${ROUNDS:-3}" DURATION="${DURATION:-10}" DUE="${DUE:-1000}"
readonly FEW="${FEW:-100}" MANY="${MANY:-10000}" IDLE_S="${IDLE_S:-20}"
readonly PROCESSES="${PROCESSES:-2}" POOL="${POOL:-16}"
readonly BENCH_DB="${BENCH_DB:-rowlock_schedules_bench}"
readonly KEEP="${KEEP:-0}"

log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'schedules.sh: error: %s\n' "$*" >&2
    exit 1
}

for v in ROUNDS DURATION DUE FEW MANY IDLE_S PROCESSES POOL; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
[ "$MANY" -gt "$FEW" ] || die "MANY ($MANY) must be more than FEW ($FEW)"
[[ $BENCH_DB =~ ^[a-z_][a-z0-9_]*$ ]] || die "BENCH_DB must be a plain lower-case name"
[ -n "${ROWLOCK_DATABASE_URL:-}" ] || die "ROWLOCK_DATABASE_URL is required"
[ -x "$BUILD/rowlock" ] || die "no $BUILD/rowlock: build first (or set BUILD_DIR)"
command -v python3 >/dev/null || die "python3 is missing"
ensure_pg_tools psql
PSQL=$(pg_tool psql)
readonly PSQL

# The bench's database: ROWLOCK_DATABASE_URL with its database name replaced.
BENCH_URL=$(sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$BENCH_DB#" <<<"$ROWLOCK_DATABASE_URL")
readonly BENCH_URL
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do stop_server "$pid"; done
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
PORTS=()
for ((p = 1; p <= PROCESSES; p++)); do
    PIDS+=("$(start "p$p")")
    PORTS+=("$(wait_port "${PIDS[-1]}")") || die "rowlock did not start: $(tail -n 5 "$WORK/p$p.log")"
done
readonly PORT=${PORTS[0]}
readonly URL="http://127.0.0.1:$PORT"
DURABILITY=$(sql "SELECT 'fsync=' || current_setting('fsync') || ', synchronous_commit=' ||
    current_setting('synchronous_commit')")
log "$PROCESSES processes on $BENCH_DB ($DURABILITY)"

# put PREFIX FROM TO BODY|delete: schedules PREFIX<i> through the API
put() { python3 "$HERE/put.py" "$PORT" "$@" >/dev/null || die "PUT/DELETE /schedules/$1* failed"; }
curl -fsS -X PUT -H 'Content-Type: application/json' -d '{}' "$URL/queues/ticks" >/dev/null
curl -fsS -X PUT -H 'Content-Type: application/json' -d '{}' "$URL/queues/idle" >/dev/null

# ---- fire lag ----

# Every fire, copied once per firing statement (the service trims its own history).
sql "CREATE TABLE public.bench_fires (schedule_id bigint, fire_at timestamptz,
       enqueued_at timestamptz);
     CREATE FUNCTION public.bench_fires() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
       INSERT INTO public.bench_fires SELECT schedule_id, fire_at, enqueued_at FROM new_fires;
       RETURN NULL; END \$\$;
     CREATE TRIGGER bench_fires AFTER INSERT ON rowlock.schedule_fires
       REFERENCING NEW TABLE AS new_fires FOR EACH STATEMENT
       EXECUTE FUNCTION public.bench_fires()" >/dev/null
readonly LAG_BODY='{"cron":"* * * * * *","queue":"ticks","paused":true}'
put lag-one- 1 1 "$LAG_BODY"
put lag-due- 1 "$DUE" "$LAG_BODY"

# lag_round PREFIX N: unpauses the N schedules PREFIX*, all due from the second after next, for
# DURATION ticks each, pauses them; prints "p50 p99 max fired due spread": the lag's p50, p99
# and max (ms), the ticks fired and due, and the longest time from a tick's first enqueue to
# its last (ms: what firing the N of one second took, whatever the passes' phase)
lag_round() {
    local prefix=$1 n=$2 t0 i fired=0
    t0=$(sql "WITH u AS (UPDATE rowlock.schedules SET paused = false, next_fire_at =
        date_trunc('second', now()) + interval '2 s' WHERE name LIKE '$prefix%'
        RETURNING next_fire_at) SELECT extract(epoch FROM min(next_fire_at))::int8 FROM u")
    local window="f.fire_at >= to_timestamp($t0) AND f.fire_at < to_timestamp($t0 + $DURATION)"
    local mine="f.schedule_id IN (SELECT id FROM rowlock.schedules WHERE name LIKE '$prefix%')"
    until [ "$(sql "SELECT now() >= to_timestamp($t0 + $DURATION)")" = t ]; do sleep 0.2; done
    sql "UPDATE rowlock.schedules SET paused = true, next_fire_at = NULL
        WHERE name LIKE '$prefix%'" >/dev/null
    # the passes still running commit what they planned
    for ((i = 0; i < 50; i++)); do
        fired=$(sql "SELECT count(*) FROM public.bench_fires f WHERE $mine AND $window")
        [ "$fired" -ge $((n * DURATION)) ] && break
        sleep 0.1
    done
    sql "WITH x AS (SELECT f.schedule_id, f.fire_at, f.enqueued_at,
              extract(epoch FROM f.enqueued_at - f.fire_at) * 1000 AS ms
              FROM public.bench_fires f WHERE $mine AND $window),
          t AS (SELECT extract(epoch FROM max(enqueued_at) - min(enqueued_at)) * 1000 AS spread
              FROM x GROUP BY fire_at)
        SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1),
        round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
        round(max(ms)::numeric, 1), count(DISTINCT (schedule_id, fire_at)), $((n * DURATION)),
        (SELECT round(max(spread)::numeric, 1) FROM t) FROM x" | tr '|' ' '
}

declare -A LAG
for ((r = 1; r <= ROUNDS; r++)); do
    order="one due"
    ((r % 2 == 1)) || order="due one"
    for side in $order; do
        n=1
        [ "$side" = one ] || n=$DUE
        LAG[$side.$r]=$(lag_round "lag-$side-" "$n")
        log "lag round $r, $n schedule(s): p50 p99 max (ms) fired due spread (ms): ${LAG[$side.$r]}"
    done
done
put lag-due- 1 "$DUE" delete
put lag-one- 1 1 delete
# the jobs the ticks made go with their queue: the idle samples start from an empty one
curl -fsS -X DELETE "$URL/queues/ticks?force=true" >/dev/null

# ---- idle cost ----

# Waits (up to a minute) until no upkeep is due: the first visit of each new schedule is work
# that is due, not idle load.
settle() {
    local due i
    for ((i = 0; i < 600; i++)); do
        due=$(sql "SELECT count(*) FROM rowlock.upkeep WHERE due_at <= now()")
        [ "$due" -eq 0 ] && return
        sleep 0.1
    done
    log "upkeep still due after a minute: $due resources"
}

STATEMENTS=0
if sql "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null 2>&1 &&
    sql "SELECT count(*) FROM pg_stat_statements" >/dev/null 2>&1; then
    STATEMENTS=1
fi

# The transactions every process has run (rowlock_db_transactions_total of its /metrics, both
# outcomes), summed.
rowlock_xacts() {
    local port sum=0 n
    for port in "${PORTS[@]}"; do
        n=$(curl -fsS "http://127.0.0.1:$port/metrics" |
            awk '$1 ~ /^rowlock_db_transactions_total\{/ { s += $2 } END { printf "%d", s }')
        sum=$((sum + n))
    done
    echo "$sum"
}

# idle_sample: "rowlock-transactions/s transactions/s rows-read/s statements/s", nothing sent:
# the processes' own count over IDLE_S seconds (less what a scrape of every process itself runs,
# measured by two scrapes in a row), and over the IDLE_S seconds before, the database's
# transactions (pg_stat_database: autovacuum's too), the rows of rowlock.schedules read, and
# pg_stat_statements' calls ("n/a" without it)
idle_sample() {
    local q a b m0 m1 m2
    q="SELECT xact_commit + xact_rollback, (SELECT coalesce(seq_tup_read, 0) +
        coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE relid =
        'rowlock.schedules'::regclass)"
    ((STATEMENTS)) && q+=", (SELECT sum(calls) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$BENCH_DB')"
    q+=" FROM pg_stat_database WHERE datname = '$BENCH_DB'"
    settle
    # what autovacuum would do after the schedules created or deleted (and the jobs deleted),
    # done before the sample
    sql "VACUUM ANALYZE" >/dev/null
    # an idle backend reports its counts to pg_stat_database up to 10 s late (PostgreSQL's
    # PGSTAT_IDLE_INTERVAL): the first upkeep's transactions must not land in the sample
    sleep 11
    a=$(sql "SELECT pg_stat_clear_snapshot(); $q" | tail -n 1)
    sleep "$IDLE_S"
    b=$(sql "SELECT pg_stat_clear_snapshot(); $q" | tail -n 1)
    # then the processes' own count, in a window of its own: a scrape reads the database too
    # (its counts of resources, reported late to pg_stat_database), so none falls in the first
    m0=$(rowlock_xacts)
    m1=$(rowlock_xacts)
    sleep "$IDLE_S"
    m2=$(rowlock_xacts)
    # the sampling's own transaction (one, of two statements) is taken off
    awk -v a="$a" -v b="$b" -v s="$IDLE_S" -v m0="$m0" -v m1="$m1" -v m2="$m2" 'BEGIN {
        split(a, x, "|"); split(b, y, "|")
        printf "%.1f %.1f %.0f ", (m2 - m1 - (m1 - m0)) / s, (y[1] - x[1] - 1) / s, (y[2] - x[2]) / s
        if (y[3] != "") printf "%.1f", (y[3] - x[3] - 2) / s; else printf "n/a" }'
}

readonly IDLE_BODY='{"cron":"0 0 1 1 *","queue":"idle"}'
put idle- 1 "$FEW" "$IDLE_BODY"
declare -A IDLE
count=$FEW
# to N: creates or deletes schedules idle-<i> so that there are N of them
to() {
    if [ "$1" -gt "$count" ]; then
        put idle- $((count + 1)) "$1" "$IDLE_BODY"
    elif [ "$1" -lt "$count" ]; then
        put idle- $(($1 + 1)) "$count" delete
    fi
    count=$1
}
for ((r = 1; r <= ROUNDS; r++)); do
    order="$FEW $MANY"
    ((r % 2 == 1)) || order="$MANY $FEW"
    for n in $order; do
        to "$n"
        [ "$(sql "SELECT count(*) FROM rowlock.schedules WHERE next_fire_at > now()")" -eq "$n" ] ||
            die "expected $n schedules not due"
        IDLE[$n.$r]=$(idle_sample)
        log "idle round $r, $n schedules: rowlock xact/s, database xact/s, schedules rows read/s, statements/s: ${IDLE[$n.$r]}"
    done
done

# ---- the report ----

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else printf "n/a" }'; }
printf '\n%s processes, %s; rounds of %s s\n\n' "$PROCESSES" "$DURABILITY" "$DURATION"
printf '| round | 1 schedule: p50 / p99 / max ms (fired/due) | %s due together: p50 / p99 / max ms (fired/due) | p50, p99 ratio | %s: a tick first to last enqueue, max ms |\n|---|---|---|---|---|\n' "$DUE" "$DUE"
for ((r = 1; r <= ROUNDS; r++)); do
    read -r o50 o99 omax ofired odue _ <<<"${LAG[one.$r]}"
    read -r d50 d99 dmax dfired ddue dspread <<<"${LAG[due.$r]}"
    printf '| %d | %s / %s / %s (%s/%s) | %s / %s / %s (%s/%s) | %s, %s | %s |\n' "$r" "$o50" \
        "$o99" "$omax" "$ofired" "$odue" "$d50" "$d99" "$dmax" "$dfired" "$ddue" \
        "$(ratio "$o50" "$d50")" "$(ratio "$o99" "$d99")" "$dspread"
done
printf '\n| round | %s schedules: rowlock xact/s; database xact/s, schedules rows read/s, statements/s | %s schedules: the same | rowlock xact/s ratio |\n|---|---|---|---|\n' "$FEW" "$MANY"
for ((r = 1; r <= ROUNDS; r++)); do
    read -r fo fx fr fs <<<"${IDLE[$FEW.$r]}"
    read -r mo mx mr ms <<<"${IDLE[$MANY.$r]}"
    printf '| %d | %s; %s, %s, %s | %s; %s, %s, %s | %s |\n' "$r" "$fo" "$fx" "$fr" "$fs" "$mo" "$mx" \
        "$mr" "$ms" "$(ratio "$fo" "$mo")"
done
