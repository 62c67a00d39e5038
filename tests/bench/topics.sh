#!/usr/bin/env bash
# tests/bench/topics.sh: compacted-topic write throughput of rowlock, under wrk, beside the same
# SQL driven by pgbench against the same database in the same run (the ceiling rowlock can reach:
# its statements, its transactions, its round trips, without HTTP, JSON or the service around it).
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/topics.sh
#
# Four operations, each measured through rowlock (wrk, tests/bench/topics/*.lua) and through
# pgbench (scripts composed from tests/bench/topics/*.sql), each run on a fresh topic:
#   produce-1    POST /topics/T/messages, one message a request             messages/s
#   produce-100  POST /topics/T/messages, a batch of 100 messages a request  messages/s
#   patch-new    PATCH /topics/T/keys/K/head, a new key K a request          PATCHes/s
#   patch-hot    PATCH /topics/T/keys/hot/head, one key for every request     PATCHes/s
# The pgbench scripts issue the statements rowlock issues for that operation, in its order and
# transaction and in its round trips (db_tx_run, produce_tx, head_write_tx, db_key_lock_head in
# db/topics.c and db/topic_handles.c), each round trip a pgbench pipeline: BEGIN, SET LOCAL plan_cache_mode and the
# topic resolve, and for a PATCH in the same round trip (rowlock knows the topic's id from an
# earlier request: hinted_lock) the locked read (SELECT ... FOR UPDATE of the head row, the
# headless INSERT ... ON CONFLICT DO NOTHING RETURNING, the read of the head); then the produce
# CTE and COMMIT. The SQL files are rowlock's text verbatim (checked against
# db/topic_handles.c at every run); only the parameters become pgbench expressions (see compose()). The
# order of the statements is not checked against the C code: that is what the "same work" table
# is for (the index scans, inserts and updates PostgreSQL counted on each topic's tables, per
# request and per pgbench transaction, must agree).
#
# After each rowlock run the messages in the topic's log (counted in SQL) are compared with the
# successful requests: the number rowlock answered 2xx (its access log) times the batch must equal
# it exactly, and it may not be below the number wrk saw answered (wrk stops with requests in
# flight that rowlock still commits, so wrk's count may be lower, by at most its connections).
#
# Also reported: where rowlock's requests wait (how many libmicrohttpd worker threads served
# them, handler latency from rowlock's access log beside wrk's), rowlock's pool and transaction
# counters from /metrics, and its log's size.
#
# PIN=1: PostgreSQL on CPU 0, everything else on CPU 1 (as in queues.sh; tests/bench/lib.sh).
# Environment: ROWLOCK_DATABASE_URL (required; its schema must be the build's), DURATION (seconds
# a run, default 10), THREADS (ROWLOCK_THREADS, default 8), POOL (ROWLOCK_POOL_SIZE, default 16),
# CLIENTS (pgbench clients, default 16), CONNECTIONS (wrk connections, default CLIENTS),
# ROWLOCK_LOG_LEVEL (default info, so access logs are written, to a file), OPS (the operations,
# default "produce-1 produce-100 patch-new patch-hot"), RUNS (default 1; with more, every
# operation is measured that many times on each side, alternating, on fresh topics, and the best
# run of each side is reported: noise from other work on the machine only ever lowers a figure),
# KEEP_LOGS=1 (keep rowlock's log, the wrk and pgbench outputs and the composed pgbench scripts;
# removed at exit otherwise), KEEP_TOPICS=1 (keep the bench topics; dropped at exit otherwise),
# BUILD_DIR (default build). Options for both sides' database sessions can ride on the URL, e.g.
# ...&options=-c%20plan_cache_mode%3Dforce_generic_plan. Benchmarks report, they do not assert:
# the exit status is 0 whatever the ratios, non-zero only when something could not be built,
# started or measured.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
readonly ROOT
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"
readonly HERE="$ROOT/tests/bench/topics"
readonly BUILD="${BUILD_DIR:-$ROOT/build}"
readonly THREADS="${THREADS:-8}"
readonly POOL="${POOL:-16}"
readonly CLIENTS="${CLIENTS:-16}"
readonly CONNECTIONS="${CONNECTIONS:-$CLIENTS}"
readonly DURATION="${DURATION:-10}"
readonly LOG_LEVEL="${ROWLOCK_LOG_LEVEL:-info}"
readonly KEEP_LOGS="${KEEP_LOGS:-0}" KEEP_TOPICS="${KEEP_TOPICS:-0}"
readonly OPS="${OPS:-produce-1 produce-100 patch-new patch-hot}"
readonly RUNS="${RUNS:-1}"
readonly WRK_THREADS=2 PGBENCH_JOBS=2 WARMUP_S=2 BATCH=100

log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'topics.sh: error: %s\n' "$*" >&2
    exit 1
}

for v in THREADS POOL CLIENTS CONNECTIONS DURATION RUNS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
[ "$CONNECTIONS" -ge "$WRK_THREADS" ] || die "CONNECTIONS must be at least $WRK_THREADS"
[ "$CLIENTS" -ge "$PGBENCH_JOBS" ] || die "CLIENTS must be at least $PGBENCH_JOBS"
for op in $OPS; do
    case $op in
    produce-1 | produce-100 | patch-new | patch-hot) ;;
    *) die "unknown operation '$op' in OPS (produce-1, produce-100, patch-new, patch-hot)" ;;
    esac
done

if [ -z "${ROWLOCK_DATABASE_URL:-}" ]; then
    cat >&2 <<'EOF'
topics.sh: error: ROWLOCK_DATABASE_URL is not set.
This bench runs rowlock and pgbench against the same PostgreSQL database, so it needs a database
rowlock may use (it applies or checks its schema at startup; the bench creates topics there and
drops them at exit). Set ROWLOCK_DATABASE_URL to its libpq URL, e.g.
  ROWLOCK_DATABASE_URL='postgresql:///rowlock?host=/path/to/sock&user=rowlock' tests/bench/topics.sh
`deploy/local.sh run` starts a private cluster (.rowlock/pg) and prints its ROWLOCK_DATABASE_URL;
while it runs, that URL works from another shell.
EOF
    exit 1
fi
readonly DB_URL="$ROWLOCK_DATABASE_URL"

# ---------------------------------------------------------------------------------------------
# Tools and build

if ! command -v wrk >/dev/null 2>&1; then
    log "wrk is not installed"
    apt_install wrk || die "wrk is missing; install it (apt-get install wrk) and run again"
fi
ensure_pg_tools pgbench psql
PGBENCH=$(pg_tool pgbench)
PSQL=$(pg_tool psql)
readonly PGBENCH PSQL
command -v curl >/dev/null 2>&1 || die "curl is missing; install it (apt-get install curl)"

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

# ---------------------------------------------------------------------------------------------
# The SQL rowlock issues, as pgbench scripts

# c_sql NAME: the SQL text db/topic_handles.c or db/topics.c declares as `static const char NAME[]`, or as the second
# string of `struct db_stmt NAME` (the first is the statement's name): string pieces concatenated,
# escapes undone, string macros (#define TOPIC_COLUMNS, HEAD_SELECT...) expanded, and so is
# DB_TS("col") of db/sql.h (its text is written here: keep it in step).
c_sql() {
    awk -v name="$1" '
    function ts(col) { return "to_char(" col " AT TIME ZONE '"'"'UTC'"'"', '"'"'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'"'"')" }
    # The string pieces of line, each preceded by \002; a known macro stands for its text.
    function lits(line,    s, out) {
        out = ""
        while (match(line, /DB_TS\("[^"]*"\)|"([^"\\]|\\.)*"|[A-Z][A-Z0-9_]*/)) {
            s = substr(line, RSTART, RLENGTH)
            line = substr(line, RSTART + RLENGTH)
            if (s ~ /^DB_TS\(/) {
                out = out "\002" ts(substr(s, 8, length(s) - 9))
            } else if (s == "DB_TS") {
                tsopen = 1 # its argument is the next string, on the next line
            } else if (s ~ /^"/) {
                s = substr(s, 2, length(s) - 2)
                gsub(/\\"/, "\"", s)
                gsub(/\\\\/, "\\", s)
                if (tsopen) { s = ts(s); tsopen = 0 }
                out = out "\002" s
            } else if (s in macro) {
                out = out "\002" macro[s]
            }
        }
        return out
    }
    indef {
        body = body lits($0)
        if ($0 !~ /\\[ \t]*$/) { gsub(/\002/, "", body); if (body != "") macro[def] = body; indef = 0 }
        next
    }
    /^#define [A-Z][A-Z0-9_]*[ \t]/ {
        def = $2; line = $0; sub(/^#define [A-Z][A-Z0-9_]*/, "", line); body = lits(line)
        if ($0 ~ /\\[ \t]*$/) indef = 1
        else { gsub(/\002/, "", body); if (body != "") macro[def] = body }
        next
    }
    !on && (index($0, "static const char " name "[] =") || index($0, "struct db_stmt " name " =")) {
        on = 1; stmt = index($0, "struct db_stmt") > 0
        p = index($0, name "[] =")
        line = p > 0 ? substr($0, p + length(name) + 4) : substr($0, index($0, name " =") + length(name) + 2)
        text = lits(line)
        if ($0 ~ /;[ \t]*$/) { done() }
        next
    }
    on { text = text lits($0); if ($0 ~ /;[ \t]*$/) done() }
    function done(    n, i, out, piece) {
        n = split(text, piece, "\002"); out = ""
        for (i = 2 + stmt; i <= n; i++) out = out piece[i]
        print out; exit
    }' "$ROOT/db/topics_internal.h" "$ROOT/db/topic_handles.c" "$ROOT/db/topics.c"
}

# The statement in $HERE/$1 (its -- comment lines dropped).
sql_file() { grep -v '^--' "$HERE/$1"; }

# Each SQL file must be db/topic_handles.c's statement, whitespace aside: otherwise pgbench would not
# measure what rowlock does, and the ratio would mean nothing.
check_sql() {
    local file c_name want have bad=0
    for pair in resolve.sql:st_resolve head_lock.sql:st_head_lock head_read.sql:st_head_read \
        head_insert.sql:st_head_insert produce.sql:st_produce; do
        file=${pair%%:*} c_name=${pair#*:}
        want=$(c_sql "$c_name" | tr -d ' \t\n')
        have=$(sql_file "$file" | tr -d ' \t\n')
        if [ -z "$want" ]; then
            log "cannot find $c_name in db/topic_handles.c"
            bad=1
        elif [ "$want" != "$have" ]; then
            log "tests/bench/topics/$file is not $c_name of db/topic_handles.c any more:"
            log "  db/topic_handles.c: $(c_sql "$c_name")"
            bad=1
        fi
    done
    [ "$bad" = 0 ] || die "update tests/bench/topics/*.sql to the SQL of db/topic_handles.c"
}

# stmt FILE [PARAM EXPRESSION]...: the statement of FILE with each $n replaced by a pgbench
# expression, ended by ';'.
stmt() {
    local text
    text=$(sql_file "$1")
    shift
    printf '%s;\n' "$(bind "$text" "$@")"
}

# compose OP TOPIC_ID: the pgbench script of OP on topic TOPIC_ID (its rows of the shared tables).
# Variables: :client_id (pgbench's), :n (each client's transaction counter, from -D n=0), :k (a
# key no other transaction uses: (client + 1) * 10^9 + n, sent as text), :topic, :tid and :tseq
# (the topic's id and its offset sequence), :sv (the topic's default schema version: no
# producer), :hot (the hot key). A parameter rowlock binds as
# one value (the topic name, a key, the schema version) is bound as a pgbench variable. The
# arrays rowlock binds as text ('{"k1-7"}') cannot be pgbench variables, which are numbers: they
# are built in SQL from variables, in a form that keeps rowlock's plan caching, which decides
# what PostgreSQL does per execution:
# - one message: rowlock's statement is planned afresh at every execution (pg_prepared_statements
#   shows custom_plans only): bound, the 1-element arrays make a custom plan (1 row) cheaper than
#   the generic one (10 rows: an array parameter's default estimate). array_append('{}', x), an
#   immutable call folded to a constant when planned with its parameters, does the same; ARRAY[x]
#   would not (known as 1 element even in the generic plan, which PostgreSQL would then keep,
#   skipping the planning rowlock pays for);
# - 100 messages: rowlock's statement goes to the generic plan after 5 executions; so do arrays
#   built by sub-selects, estimated at 10 rows both ways.
# $5 (the producer) is rowlock's NULL parameter as a NULL literal. The topic's id and sequence
# are parameters, as rowlock binds them: as literals (as an earlier version of this script bound them)
# the planner used the topic's own statistics, which a topic created by the bench is not in yet,
# and chose plans that read every row of the topic: the ceiling fell as the topic grew (PATCH of
# a new key, 4 clients, 5 s runs: 2,069 then 949 transactions/s; 11,135 then 12,191 bound).
# shellcheck disable=SC2016 # '$1' and the like are the statements' parameters, not bash's
compose() {
    local op=$1 id=$2 script
    local null1="'{NULL}'" nulls="ARRAY(SELECT NULL::bigint FROM generate_series(1, $BATCH))"
    local t=("\$7" ":tid" "\$8" ":tseq")
    script=$(
        printf '\\set n :n + 1\n\\set k (:client_id + 1) * 1000000000 + :n\n'
        printf '\\startpipeline\nBEGIN;\nSET LOCAL plan_cache_mode = force_generic_plan;\n'
        stmt resolve.sql '$1' ':topic'
        case $op in
        produce-1)
            printf '\\endpipeline\n\\startpipeline\n'
            stmt produce.sql '$1' "array_append('{}', :k)" \
                '$2' "array_append('{}', '{\"n\":' || :n || '}')" \
                '$3' "$null1" '$4' "$null1" '$5' 'NULL::text' '$6' ':sv' "${t[@]}"
            ;;
        produce-100)
            printf '\\endpipeline\n\\startpipeline\n'
            stmt produce.sql \
                '$1' "ARRAY(SELECT :k || '-' || g FROM generate_series(1, $BATCH) g)" \
                '$2' "ARRAY(SELECT '{\"n\":' || :n || '}' FROM generate_series(1, $BATCH))" \
                '$3' "$nulls" '$4' "$nulls" '$5' 'NULL::text' '$6' ':sv' "${t[@]}"
            ;;
        patch-new)
            stmt head_lock.sql '$1' ':tid' '$2' ':k'
            stmt head_insert.sql '$1' ':tid' '$2' ':k'
            stmt head_read.sql '$1' ':tid' '$2' ':k'
            printf '\\endpipeline\n\\startpipeline\n'
            stmt produce.sql '$1' "array_append('{}', :k)" '$2' "array_append('{}', '{\"f\":1}')" \
                '$3' "$null1" '$4' "$null1" '$5' 'NULL::text' '$6' ':sv' "${t[@]}"
            ;;
        patch-hot)
            stmt head_lock.sql '$1' ':tid' '$2' ':hot'
            stmt head_insert.sql '$1' ':tid' '$2' ':hot'
            stmt head_read.sql '$1' ':tid' '$2' ':hot'
            printf '\\endpipeline\n\\startpipeline\n'
            stmt produce.sql '$1' "array_append('{}', :hot)" \
                '$2' "array_append('{}', '{\"f\":' || :k || '}')" \
                '$3' "$null1" '$4' "$null1" '$5' 'NULL::text' '$6' ':sv' "${t[@]}"
            ;;
        esac
        printf 'COMMIT;\n\\endpipeline\n'
    )
    # pgbench takes every :name as a variable, even inside a string literal: the ':' of the
    # to_char formats become \x3A in an E'' literal, the same constant once parsed.
    script=${script//"'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'"/"E'YYYY-MM-DD\"T\"HH24\\x3AMI\\x3ASS.US\"Z\"'"}
    local stray
    stray=$(grep -oE '\$[0-9]+' <<<"$script" | sort -u | tr '\n' ' ' || true)
    [ -z "$stray" ] || die "compose $op: unbound $stray"
    stray=$(grep -v '^\\set' <<<"$script" | grep -oE '(^|[^:]):[A-Za-z_][A-Za-z0-9_]*' |
        sed 's/^[^:]*://' | grep -vxE 'client_id|n|k|topic|sv|hot|tid|tseq' | sort -u | tr '\n' ' ' || true)
    [ -z "$stray" ] || die "compose $op: unknown pgbench variables $stray"
    printf '%s\n' "$script"
}

check_sql

# ---------------------------------------------------------------------------------------------
# rowlock

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rowlock-bench-topics.XXXXXX")"
readonly WORK
readonly ROWLOCK_LOG="$WORK/rowlock.log"
ROWLOCK_PID=""
TOPICS=()

# Drops the bench topics (their rows and sequences with them), as DELETE /topics/T would.
drop_topics() {
    [ "${#TOPICS[@]}" -gt 0 ] && [ "$KEEP_TOPICS" != 1 ] || return 0
    local list
    list=$(printf '"%s",' "${TOPICS[@]}")
    sql "WITH d AS (DELETE FROM rowlock.topics WHERE name = ANY('{${list%,}}'::text[]) RETURNING id)
         SELECT rowlock.topic_drop_tables(id) FROM d" >/dev/null ||
        log "could not drop the bench topics ${TOPICS[*]}"
    TOPICS=()
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
on_exit() {
    pin_restore
    stop_server "$ROWLOCK_PID"
    ROWLOCK_PID=""
    drop_topics
    # At level info the log grows by every request's access line: not kept unless asked for.
    [ "$KEEP_LOGS" = 1 ] || rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# PIN=1: PostgreSQL on CPU 0, this script and what it starts from here on on CPU 1 (lib.sh)
[ "${PIN:-0}" = 0 ] || pin_postgres "$PSQL" "$DB_URL"

fail_server() {
    printf 'topics.sh: error: rowlock did not start or does not answer; the end of %s:\n' \
        "$ROWLOCK_LOG" >&2
    tail -n 5 "$ROWLOCK_LOG" >&2 || true
    exit 1
}

alive() { kill -0 "$ROWLOCK_PID" 2>/dev/null || fail_server; }

LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
DURABILITY=$(sql "SELECT 'fsync=' || current_setting('fsync') || ', synchronous_commit=' ||
    current_setting('synchronous_commit')")
readonly LOAD_AT_START
log "starting rowlock ($THREADS threads, pool of $POOL, log level $LOG_LEVEL, stderr to" \
    "$ROWLOCK_LOG)"
# An unreachable database ends rowlock (and the run) after 10 s rather than its default 60 s.
ROWLOCK_LISTEN_ADDRESS=127.0.0.1 ROWLOCK_PORT=0 ROWLOCK_THREADS="$THREADS" \
    ROWLOCK_POOL_SIZE="$POOL" ROWLOCK_LOG_LEVEL="$LOG_LEVEL" \
    ROWLOCK_DB_STARTUP_WAIT_S="${ROWLOCK_DB_STARTUP_WAIT_S:-10}" \
    "$ROWLOCK_BIN" 2>"$ROWLOCK_LOG" &
ROWLOCK_PID=$!
PORT=$(wait_port "$ROWLOCK_PID") || fail_server
readonly BASE="http://127.0.0.1:$PORT"
for ((i = 0; i < 100; i++)); do
    alive
    curl -fsS -o /dev/null "$BASE/healthz" 2>/dev/null && break
    sleep 0.1
done
curl -fsS -o /dev/null "$BASE/healthz" || fail_server

# http METHOD PATH [BODY [CONTENT-TYPE]]: one request to rowlock; fails unless 2xx.
http() {
    curl -fsS -o /dev/null -X "$1" -H "Content-Type: ${4:-application/json}" \
        ${3:+--data-binary "$3"} "$BASE$2" || die "$1 $2 failed"
}

# new_topic OP SIDE [RUN]: creates a fresh topic for operation OP through SIDE (rowlock or
# pgbench) with PUT /topics/T, and sets TOPIC to its name, TOPIC_ID to its id (from rowlock.topics). For
# patch-hot, its key "hot" is given a head first (PATCH): every measured PATCH finds it.
new_topic() {
    TOPIC="bench-$1-$2${3:+-r$3}-$$"
    TOPICS+=("$TOPIC")
    http PUT "/topics/$TOPIC" '{}'
    TOPIC_ID=$(sql "SELECT id FROM rowlock.topics WHERE name = '$TOPIC'")
    [[ $TOPIC_ID =~ ^[0-9]+$ ]] || die "no id for topic $TOPIC in rowlock.topics"
    [ "$1" != patch-hot ] || http PATCH "/topics/$TOPIC/keys/hot/head" '{"f":0}' \
        application/merge-patch+json
    # A checkpoint falls due after enough WAL; taken here, it does not land inside one side's
    # run (it needs superuser or pg_checkpoint; without, the runs just stay noisier).
    sql 'CHECKPOINT' >/dev/null 2>&1 || true
}

# messages ID: the messages in topic ID's log (holes, offsets nothing committed at, excluded).
messages() { sql "SELECT count(*) FROM rowlock.topic_messages WHERE topic_id = $1 AND NOT hole"; }

# ---------------------------------------------------------------------------------------------
# Measurements

# CPU ticks of each of process $1's libmicrohttpd worker threads (the threads that run the
# request handlers), one "tid ticks" a line.
worker_ticks() {
    local t stat comm
    for t in /proc/"$1"/task/*; do
        stat=$(cat "$t/stat" 2>/dev/null) || continue
        comm=${stat#*(} comm=${comm%%)*}
        [[ $comm == MHD-worker* ]] || continue
        awk -v t="${t##*/}" '{ print t, $12 + $13 }' <<<"${stat##*) }"
    done
}

# Access-log lines of rowlock for paths under /topics/$1/ with a 2xx status: the requests rowlock
# answered successfully.
count_2xx() {
    grep -F "\"path\":\"/topics/$1/" "$ROWLOCK_LOG" | grep -c '"status":2' || true
}

# count_2xx once two counts a little apart agree (a request wrk gave up on at its deadline may
# still be finishing).
settled_2xx() {
    local a b=-1
    while :; do
        sleep 0.3
        a=$(count_2xx "$1")
        [ "$a" = "$b" ] && break
        b=$a
    done
    printf '%s\n' "$a"
}

readonly SEP=$'\t'

# run_wrk OP TOPIC ID BATCH SECONDS: wrk against rowlock; prints, tab-separated: operations/s
# (2xx responses x batch / elapsed), p99 ms, wrk's 2xx responses, non-2xx, rowlock's 2xx
# (access log), messages added to the log, rowlock CPU us per operation, worker threads that
# served requests ("busy/all"), handler latency p50 and p99 ms (rowlock's access log: from the
# request's headers to its completion), wrk's p50 ms.
run_wrk() {
    local op=$1 topic=$2 id=$3 batch=$4 secs=$5 script args before after t0 t1 out
    local requests elapsed non2xx ok p99 p50 served w0 w1 busy handler
    case $op in
    produce-*) script=produce.lua args=("$topic" "$batch") ;;
    patch-new) script=patch.lua args=("$topic" distinct) ;;
    patch-hot) script=patch.lua args=("$topic" hot) ;;
    esac
    before=$(messages "$id")
    served=$(count_2xx "$topic")
    t0=$(cpu_ticks "$ROWLOCK_PID") || alive
    w0=$(worker_ticks "$ROWLOCK_PID")
    out=$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${secs}s" --latency -s "$HERE/$script" \
        "$BASE" -- "${args[@]}" 2>&1) || {
        printf '%s\n' "$out" >&2
        die "wrk failed ($op)"
    }
    t1=$(cpu_ticks "$ROWLOCK_PID") || alive
    w1=$(worker_ticks "$ROWLOCK_PID")
    alive
    printf '%s\n' "$out" >"$WORK/wrk-$topic.txt"
    requests=$(awk '$2 == "requests" && $3 == "in" { print $1 }' <<<"$out")
    elapsed=$(awk '$2 == "requests" && $3 == "in" { sub(/,$/, "", $4); print $4 }' <<<"$out")
    p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
    p50=$(awk '$1 == "50%" { print $2 }' <<<"$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' <<<"$out")
    if [ -z "$requests" ] || [ -z "$elapsed" ] || [ -z "$p99" ] || [ "$requests" -eq 0 ]; then
        printf '%s\n' "$out" >&2
        die "cannot read requests, duration and p99 from the wrk output ($op)"
    fi
    local errors
    errors=$(grep -E '^ *(Non-2xx|Socket errors)' <<<"$out" || true)
    [ -z "$errors" ] || log "$op: wrk reports $(tr -s ' \n' ' ' <<<"$errors")"
    ok=$((requests - ${non2xx:-0}))
    served=$(($(settled_2xx "$topic") - served))
    after=$(messages "$id")
    # a worker thread counts as busy with at least 2% of the workers' CPU time over the run
    busy=$(awk 'NR == FNR { t0[$1] = $2; next }
        { d[$1] = $2 - t0[$1]; sum += d[$1]; n++ }
        END { for (t in d) if (sum > 0 && d[t] >= 0.02 * sum) b++; printf "%d/%d", b, n }' \
        <(printf '%s\n' "$w0") <(printf '%s\n' "$w1"))
    handler=$(grep -F "\"path\":\"/topics/$topic/" "$ROWLOCK_LOG" | grep '"status":2' |
        grep -o '"duration_ms":[0-9.]*' | cut -d: -f2 | sort -n |
        awk '{ v[NR] = $1 } END { if (NR == 0) { print "- -"; exit }
            a = int(NR * 0.5); b = int(NR * 0.99); if (a < 1) a = 1; if (b < 1) b = 1
            printf "%.2f %.2f", v[a], v[b] }')
    awk -v ok="$ok" -v b="$batch" -v e="$(to_ms "$elapsed")" -v p="$(to_ms "$p99")" \
        -v n2="${non2xx:-0}" -v s="$served" -v m="$((after - before))" -v t=$((t1 - t0)) \
        -v hz="$CLK_TCK" -v sep="$SEP" -v busy="$busy" -v h="$handler" \
        -v p50="$(to_ms "${p50:-0}")" 'BEGIN {
        ops = ok * b / (e / 1000); split(h, hp, " ")
        printf "%.1f%s%s%s%d%s%d%s%d%s%d%s%.1f%s%s%s%s%s%s%s%s\n", ops, sep, p, sep, ok, sep, n2,
            sep, s, sep, m, sep, (ok > 0 ? t / hz / (ok * b) * 1e6 : 0), sep, busy, sep, hp[1],
            sep, hp[2], sep, p50 }'
}

# run_pgbench OP TOPIC ID BATCH SECONDS: the same SQL under pgbench; prints, tab-separated:
# operations/s (transactions/s x batch), p99 ms (from pgbench's transaction log), transactions,
# failed transactions, messages added to the log.
run_pgbench() {
    local op=$1 topic=$2 id=$3 batch=$4 secs=$5 script before after out tps txs failed p99
    script="$WORK/pgbench-$topic.sql"
    compose "$op" "$id" >"$script"
    before=$(messages "$id")
    # the session settings rowlock gives its pooled connections (db/pool.c), so the ceiling runs
    # the same plans
    out=$(PGOPTIONS="-c plan_cache_mode=force_generic_plan -c jit=off" \
        "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$PGBENCH_JOBS" -T "$secs" \
        -D topic="$topic" -D tid="$id" -D tseq="rowlock.topic_offsets_$id" -D n=0 -D sv=1 \
        -D hot=hot -f "$script" \
        -l --log-prefix="$WORK/pgbench-$topic.log" "$DB_URL" 2>&1) || {
        printf '%s\n' "$out" >&2
        die "pgbench failed ($op; the script: $script, kept with KEEP_LOGS=1)"
    }
    printf '%s\n' "$out" >"$WORK/pgbench-$topic.txt"
    after=$(messages "$id")
    tps=$(awk '/^tps = / { print $3 }' <<<"$out")
    txs=$(awk -F': ' '/^number of transactions actually processed/ { print $2 }' <<<"$out")
    txs=${txs%%/*}
    failed=$(awk -F': ' '/^number of failed transactions/ { split($2, a, " "); print a[1] }' \
        <<<"$out")
    if [ -z "$tps" ] || [ -z "$txs" ]; then
        printf '%s\n' "$out" >&2
        die "cannot read tps and transactions from the pgbench output ($op)"
    fi
    # transaction log lines: client, transaction, latency us, script, epoch s, us
    p99=$(cat "$WORK/pgbench-$topic.log".* | awk '{ print $3 }' | sort -n |
        awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.2f", v[i] / 1000 }')
    awk -v tps="$tps" -v b="$batch" -v p="$p99" -v t="$txs" -v f="${failed:-0}" \
        -v m="$((after - before))" -v sep="$SEP" 'BEGIN {
        printf "%.1f%s%s%s%d%s%d%s%d\n", tps * b, sep, p, sep, t, sep, f, sep, m }'
}

CLK_TCK=$(getconf CLK_TCK)
readonly CLK_TCK

batch_of() { [ "$1" = produce-100 ] && echo "$BATCH" || echo 1; }

log "warming up (${WARMUP_S}s each of rowlock and pgbench, produce-1)"
new_topic warmup rowlock
run_wrk produce-1 "$TOPIC" "$TOPIC_ID" 1 "$WARMUP_S" >/dev/null
new_topic warmup pgbench
run_pgbench produce-1 "$TOPIC" "$TOPIC_ID" 1 "$WARMUP_S" >/dev/null

# counters: what PostgreSQL has counted on the topics' shared tables (pg_stat_user_tables),
# tab-separated: head table index scans, inserts, updates; log table index scans, inserts. Every
# topic's rows are in the same two tables, so a run's work is the difference over the run. An
# idle backend reports its counts up to 10 s late (PostgreSQL's PGSTAT_IDLE_INTERVAL; at once
# when it ends), hence the pause: rowlock's pooled connections stay open.
counters() {
    sleep 11
    sql "SELECT coalesce(sum(idx_scan) FILTER (WHERE relname = 'topic_heads'), 0),
                coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'topic_heads'), 0),
                coalesce(sum(n_tup_upd) FILTER (WHERE relname = 'topic_heads'), 0),
                coalesce(sum(idx_scan) FILTER (WHERE relname = 'topic_messages'), 0),
                coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'topic_messages'), 0)
         FROM pg_stat_user_tables WHERE schemaname = 'rowlock'
         AND relname IN ('topic_heads', 'topic_messages')" | tr '|' '\t'
}
# delta BEFORE AFTER: AFTER - BEFORE, figure by figure, tab-separated.
delta() {
    awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, "\t"); split(b, y, "\t")
        for (i = 1; i <= n; i++) printf "%d%s", y[i] - x[i], i < n ? "\t" : "\n" }'
}

declare -A ROW PGB ROW_ID PGB_ID ROW_WORK PGB_WORK
c0=$(counters) # what the warm-up did stays out
for ((run = 1; run <= RUNS; run++)); do
    for op in $OPS; do
        batch=$(batch_of "$op") at="$op: " key="$op.$run"
        [ "$RUNS" = 1 ] || at="$op, run $run: "
        new_topic "$op" rowlock "$run"
        ROW_ID[$key]=$TOPIC_ID
        log "${at}rowlock, wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s (topic $TOPIC)"
        ROW[$key]=$(run_wrk "$op" "$TOPIC" "$TOPIC_ID" "$batch" "$DURATION")
        c1=$(counters) && ROW_WORK[$key]=$(delta "$c0" "$c1") && c0=$c1
        IFS=$SEP read -r ops p99 _ <<<"${ROW[$key]}"
        log "${at}rowlock: $ops/s, p99 $p99 ms"
        new_topic "$op" pgbench "$run"
        PGB_ID[$key]=$TOPIC_ID
        log "${at}pgbench -M prepared -c$CLIENTS -j$PGBENCH_JOBS -T$DURATION (topic $TOPIC)"
        PGB[$key]=$(run_pgbench "$op" "$TOPIC" "$TOPIC_ID" "$batch" "$DURATION")
        c1=$(counters) && PGB_WORK[$key]=$(delta "$c0" "$c1") && c0=$c1
        IFS=$SEP read -r ops p99 _ <<<"${PGB[$key]}"
        log "${at}pgbench: $ops/s, p99 $p99 ms"
    done
done

# rowlock's own account of its pool and transactions over the whole bench (warm-up included).
METRICS=$(curl -fsS "$BASE/metrics" 2>/dev/null | awk '
    $1 == "rowlock_db_pool_acquires_total" { a = $2 }
    $1 == "rowlock_db_pool_acquire_waits_total" { w = $2 }
    $1 == "rowlock_db_pool_acquire_timeouts_total" { t = $2 }
    $1 == "rowlock_db_pool_connected" { c = $2 }
    $1 == "rowlock_db_transactions_total{outcome=\"commit\"}" { co = $2 }
    $1 == "rowlock_db_transactions_total{outcome=\"rollback\"}" { rb = $2 }
    $1 == "rowlock_db_transaction_retries_total" { re = $2 }
    $1 == "rowlock_db_transaction_failures_total" { f = $2 }
    END { printf "pool: %d acquires, %d waited for a connection, %d timed out, %d connections " \
          "open; transactions: %d committed, %d rolled back, %d retried, %d failed", \
          a, w, t, c, co, rb, re, f }' || true)

stop_server "$ROWLOCK_PID"
ROWLOCK_PID=""
drop_topics
LOG_BYTES=$(wc -c <"$ROWLOCK_LOG")
LOG_LINES=$(wc -l <"$ROWLOCK_LOG")
LOG_WARN=$(grep -cE '"level":"(warn|error)"' "$ROWLOCK_LOG" || true)

# ---------------------------------------------------------------------------------------------
# Report

describe() {
    case $1 in
    produce-1) echo "produce, 1 message/request" ;;
    produce-100) echo "produce, $BATCH messages/request" ;;
    patch-new) echo "PATCH, a new key/request" ;;
    patch-hot) echo "PATCH, one hot key" ;;
    esac
}
unit() { case $1 in produce-*) echo "messages/s" ;; *) echo "PATCH/s" ;; esac; }
target() { case $1 in produce-1) echo "" ;; patch-hot) echo 0.80 ;; *) echo 0.60 ;; esac; }

# best SIDE OP: the run of OP with the most operations/s on SIDE (ROW or PGB).
best() {
    local -n runs=$1
    local r b=1
    for ((r = 2; r <= RUNS; r++)); do
        awk -v a="${runs[$2.$r]%%"$SEP"*}" -v b="${runs[$2.$b]%%"$SEP"*}" \
            'BEGIN { exit !(a + 0 > b + 0) }' && b=$r
    done
    printf '%s\n' "$b"
}

# label OP RUN: the operation, and the run when there are several.
label() {
    if [ "$RUNS" = 1 ]; then describe "$1"; else printf '%s #%s\n' "$(describe "$1")" "$2"; fi
}

echo
printf 'compacted topics: rowlock (%s threads, pool %s, wrk -t%s -c%s, log level %s) beside\n' \
    "$THREADS" "$POOL" "$WRK_THREADS" "$CONNECTIONS" "$LOG_LEVEL"
printf 'pgbench (-M prepared -c%s -j%s) running the same SQL; %ss a run, %s cores, load average at\n' \
    "$CLIENTS" "$PGBENCH_JOBS" "$DURATION" "$(nproc)"
printf 'the start %s%s\n' "$LOAD_AT_START" \
    "$([ "$RUNS" = 1 ] || echo "; best of $RUNS runs each (every run below)")"
# A row lock is held until COMMIT returns, so durability decides what a lock-bound operation
# waits for: with fsync on, each hot-key PATCH holds the lock over its WAL flush.
printf 'PostgreSQL %s, %s\n' "$(sql 'SHOW server_version')" "$DURABILITY"
printf '%-30s %-10s %10s %8s %10s %8s %7s %8s  %-7s %9s\n' operation unit rowlock "p99 ms" \
    pgbench "p99 ms" ratio target verdict "CPU us/op"
for op in $OPS; do
    IFS=$SEP read -r r_ops r_p99 _ _ _ _ r_cpu _ <<<"${ROW[$op.$(best ROW "$op")]}"
    IFS=$SEP read -r p_ops p_p99 _ _ _ <<<"${PGB[$op.$(best PGB "$op")]}"
    awk -v d="$(describe "$op")" -v u="$(unit "$op")" -v r="$r_ops" -v rp="$r_p99" \
        -v p="$p_ops" -v pp="$p_p99" -v t="$(target "$op")" -v c="$r_cpu" 'BEGIN {
        ratio = p > 0 ? r / p : 0
        verdict = t == "" ? "report" : (ratio >= t + 0 ? "PASS" : "BELOW")
        printf "%-30s %-10s %10.0f %8.2f %10.0f %8.2f %7.3f %8s  %-7s %9.1f\n", d, u, r, rp, p,
            pp, ratio, (t == "" ? "-" : ">= " t), verdict, c }'
done
echo "rowlock and pgbench columns: operations/s (2xx responses, or transactions, x messages per"
echo "request / elapsed); p99: wrk --latency, and pgbench's per-transaction log. CPU us/op: rowlock's"
echo "user+system CPU over its run / operations (wrk, pgbench and PostgreSQL share the same cores)."
if [[ " $OPS " == *" patch-hot "* ]]; then
    echo "patch-hot: every transaction queues on one row lock, and more waiters make each commit"
    echo "slower: pgbench's $CLIENTS clients all wait, rowlock's waiters are at most its busy worker"
    echo "threads (below), so its ratio can exceed 1; CLIENTS=4 compares them at a like concurrency."
fi

echo
echo "where rowlock's requests wait (its run above): worker threads that served requests (busy/all:"
echo "libmicrohttpd pins each connection to one worker thread, and a handler holds its thread for"
echo "its whole transaction), latency inside the handler (access log) and as wrk saw it"
printf '%-30s %12s %13s %13s %13s %13s\n' operation "workers busy" "handler p50" "handler p99" \
    "wrk p50" "wrk p99"
for op in $OPS; do
    IFS=$SEP read -r _ w_p99 _ _ _ _ _ busy h50 h99 w50 <<<"${ROW[$op.$(best ROW "$op")]}"
    printf '%-30s %12s %10s ms %10s ms %10s ms %10s ms\n' "$(describe "$op")" "$busy" "$h50" \
        "$h99" "$w50" "$w_p99"
done
if [ "$RUNS" != 1 ]; then
    echo
    for op in $OPS; do
        r_all="" p_all=""
        for ((run = 1; run <= RUNS; run++)); do
            IFS=$SEP read -r _ _ _ _ _ _ _ busy _ <<<"${ROW[$op.$run]}"
            r_all+="${r_all:+, }$(printf '%.0f' "${ROW[$op.$run]%%"$SEP"*}") ($busy busy)"
            p_all+="${p_all:+, }$(printf '%.0f' "${PGB[$op.$run]%%"$SEP"*}")"
        done
        printf '%-31s rowlock %s; pgbench %s\n' "$(describe "$op"):" "$r_all" "$p_all"
    done
fi

echo
echo "nothing lost: messages in each topic's log (SQL) against the successful requests"
printf '%-30s %10s %8s %12s %12s %12s  %s\n' "rowlock run" "wrk 2xx" "non-2xx" "rowlock 2xx" \
    "x batch" "in the log" check
for ((run = 1; run <= RUNS; run++)); do
    for op in $OPS; do
        IFS=$SEP read -r _ _ ok non2xx served added _ <<<"${ROW[$op.$run]}"
        awk -v d="$(label "$op" "$run")" -v ok="$ok" -v n2="$non2xx" -v s="$served" \
            -v b="$(batch_of "$op")" -v m="$added" -v c="$CONNECTIONS" 'BEGIN {
            check = (m == s * b && m >= ok * b && m <= (ok + c) * b) ? "OK" : "MISMATCH"
            printf "%-30s %10d %8d %12d %12d %12d  %s\n", d, ok, n2, s, s * b, m, check }'
    done
done
printf '%-30s %10s %8s %12s %12s %12s  %s\n' "pgbench run" transactions failed "" "x batch" \
    "in the log" check
for ((run = 1; run <= RUNS; run++)); do
    for op in $OPS; do
        IFS=$SEP read -r _ _ txs failed added <<<"${PGB[$op.$run]}"
        awk -v d="$(label "$op" "$run")" -v t="$txs" -v f="$failed" -v b="$(batch_of "$op")" \
            -v m="$added" 'BEGIN {
            printf "%-30s %10d %8d %12s %12d %12d  %s\n", d, t, f, "", t * b, m,
                (m == t * b ? "OK" : "MISMATCH") }'
    done
done
echo "check OK: the log holds exactly (rowlock's 2xx answers x batch) new messages, and no fewer than"
echo "wrk's 2xx x batch (wrk stops with up to $CONNECTIONS requests in flight, which rowlock still"
echo "commits and answers: those are in rowlock's count, not in wrk's)."

echo
echo "same work: what PostgreSQL counted on the topics' tables over each run (pg_stat_user_tables), per rowlock"
echo "request answered 2xx and per pgbench transaction$([ "$RUNS" = 1 ] || echo ", over all runs")"
printf '%-30s %-8s %11s %8s %8s %11s %8s  %s\n' operation "" "head scans" inserts updates \
    "log scans" inserts check
for op in $OPS; do
    rn=0 pn=0 rw="0 0 0 0 0" pw="0 0 0 0 0"
    for ((run = 1; run <= RUNS; run++)); do
        IFS=$SEP read -r _ _ _ _ served _ <<<"${ROW[$op.$run]}"
        IFS=$SEP read -r _ _ txs _ _ <<<"${PGB[$op.$run]}"
        rn=$((rn + served)) pn=$((pn + txs))
        rw=$(awk -v a="$rw" -v b="${ROW_WORK[$op.$run]}" 'BEGIN { n = split(a, x, " ");
            split(b, y, "\t"); for (i = 1; i <= n; i++) printf "%d ", x[i] + y[i] }')
        pw=$(awk -v a="$pw" -v b="${PGB_WORK[$op.$run]}" 'BEGIN { n = split(a, x, " ");
            split(b, y, "\t"); for (i = 1; i <= n; i++) printf "%d ", x[i] + y[i] }')
    done
    awk -v d="$(describe "$op")" -v rn="$rn" -v pn="$pn" -v r="$rw" -v p="$pw" 'BEGIN {
        split(r, a, " "); split(p, b, " "); same = 1; any = 0
        for (i = 1; i <= 5; i++) {
            a[i] = rn > 0 ? a[i] / rn : 0; b[i] = pn > 0 ? b[i] / pn : 0; any += a[i] + b[i]
            diff = a[i] - b[i]; if (diff < 0) diff = -diff
            if (diff > 0.05 && diff > 0.1 * (a[i] > b[i] ? a[i] : b[i])) same = 0
        }
        f = "%-30s %-8s %11.2f %8.2f %8.2f %11.2f %8.2f  %s\n"
        printf f, d, "rowlock", a[1], a[2], a[3], a[4], a[5], ""
        printf f, "", "pgbench", b[1], b[2], b[3], b[4], b[5],
            (any == 0 ? "no statistics (track_counts off?)" : same ? "same" : "DIFFERENT") }'
done
echo "same: every figure within 10% (or 0.05). DIFFERENT means the pgbench script no longer does what"
echo "rowlock does for that operation (its statements changed order or number): fix compose()."

echo
echo "rowlock's /metrics at the end: ${METRICS:-(could not be read)}"
echo "rowlock's stderr (JSON log at level $LOG_LEVEL; an access-log line a request) went to a file:"
echo "  $ROWLOCK_LOG: $LOG_LINES lines, $LOG_BYTES bytes"
if [ "$LOG_WARN" -gt 0 ]; then
    echo "  $LOG_WARN warn/error lines, the first ones:"
    grep -E '"level":"(warn|error)"' "$ROWLOCK_LOG" | head -n 5 | sed 's/^/    /'
fi
if [ "$KEEP_LOGS" = 1 ]; then
    echo "  kept, with the wrk and pgbench outputs and pgbench scripts, in $WORK"
    echo "  (remove it with: rm -r $WORK)"
else
    echo "  removed at exit with $WORK (KEEP_LOGS=1 keeps them)"
fi
exit 0
