#!/usr/bin/env bash
# tests/bench/latency.sh: cross-process wake-ups (LISTEN/NOTIFY). Enqueue-to-claim latency with
# the enqueuer on one rowlock process and a long-polling claimer on another (p50 / p99 / max over
# JOBS jobs), beside graphile-worker's own add_job-to-start latency on the same database in the
# same run (ROUNDS rounds, alternating which goes first; the median of each system's p50 and
# p99 over the rounds, and in how many rounds rowlock's p50 was at or below); then enqueue
# throughput (one job per request, and batches of 50) with notifications on and off; and the cost the design avoids: a pg_notify inside a writer's transaction
# (pgbench, the same insert with and without it). Reports; asserts nothing.
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/latency.sh
#
# Environment: ROWLOCK_BIN (default build/rowlock), JOBS (2000), ROUNDS (3), OFF_JOBS (jobs for the latency
# with ROWLOCK_NOTIFY=false, for reference: each waits for the re-check; default 20),
# POLL_INTERVAL_MS (ROWLOCK_POLL_INTERVAL_MS of both processes, default 1000: rowlock's default),
# TPUT_SECONDS (of each throughput run, 5), TPUT_ROUNDS (2), CLIENTS (8), PEERS (1: run graphile-worker; 0: skip it),
# NPM_DIR (where graphile-worker is installed from tests/bench/queues' lock file, default
# .rowlock/bench-queues-npm, shared with queues.sh). graphile-worker installs its schema
# (graphile_worker) in the database; rowlock's queues are named latency-<pid>, tput-<pid>-*.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
log() { printf 'latency.sh: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 1
}
# shellcheck source=tests/bench/lib.sh
. "$HERE/lib.sh"

readonly ROWLOCK_BIN="${ROWLOCK_BIN:-$ROOT/build/rowlock}"
JOBS="${JOBS:-2000}" OFF_JOBS="${OFF_JOBS:-20}" ROUNDS="${ROUNDS:-3}" TPUT_ROUNDS="${TPUT_ROUNDS:-2}"
POLL_INTERVAL_MS="${POLL_INTERVAL_MS:-1000}"
SECONDS_EACH="${TPUT_SECONDS:-5}" CLIENTS="${CLIENTS:-8}" PEERS="${PEERS:-1}"
readonly NPM_DIR="${NPM_DIR:-$ROOT/.rowlock/bench-queues-npm}"
[ -n "${ROWLOCK_DATABASE_URL:-}" ] || die "ROWLOCK_DATABASE_URL is not set"
[ -x "$ROWLOCK_BIN" ] || die "no rowlock binary at $ROWLOCK_BIN (build it, or set ROWLOCK_BIN)"
command -v node >/dev/null 2>&1 || die "node is needed (apt-get install nodejs npm)"

if [ "$PEERS" = 1 ] && [ ! -d "$NPM_DIR/node_modules/graphile-worker" ]; then
    log "installing graphile-worker (npm ci in $NPM_DIR)"
    mkdir -p "$NPM_DIR"
    cp "$HERE/queues/package.json" "$HERE/queues/package-lock.json" "$NPM_DIR/"
    (cd "$NPM_DIR" && npm ci --no-audit --no-fund >&2) || die "npm ci failed in $NPM_DIR"
fi

PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do stop_server "$p"; done
}
trap cleanup EXIT

# Starts a rowlock process on port 0 with ROWLOCK_NOTIFY=$1; appends it to PIDS, sets PORT.
start_rowlock() {
    ROWLOCK_NOTIFY=$1 ROWLOCK_PORT=0 ROWLOCK_LISTEN_ADDRESS=127.0.0.1 ROWLOCK_LOG_LEVEL=warn \
        ROWLOCK_POLL_INTERVAL_MS=$POLL_INTERVAL_MS "$ROWLOCK_BIN" >/dev/null \
        2>>"$LOGDIR/rowlock-notify-$1.log" &
    PIDS+=("$!")
    PORT=$(wait_port "$!") || die "rowlock did not start (see $LOGDIR)"
}

# Two processes with ROWLOCK_NOTIFY=$1: sets CLAIM_PORT, ENQ_PORT.
start_pair() {
    PIDS=()
    start_rowlock "$1"
    CLAIM_PORT=$PORT
    start_rowlock "$1"
    ENQ_PORT=$PORT
}

put_queue() {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' -d '{}' \
        "http://127.0.0.1:$1/queues/$2" || die "cannot create queue $2"
}

LOGDIR=$(mktemp -d /tmp/rowlock-latency.XXXXXX)
log "rowlock $("$ROWLOCK_BIN" --version); logs in $LOGDIR"
log "machine: $(nproc) cores; database: $(psql "$ROWLOCK_DATABASE_URL" -Atc 'SHOW server_version' 2>/dev/null || echo '?')"

# Each round: rowlock (one pair of processes for every round, a fresh queue each) and
# graphile-worker on the same database, odd rounds rowlock first and even rounds graphile-worker
# first, so that neither always gets the first turn or the younger tables.
start_pair true
Q=latency-$$
ROUNDS_OUT="$LOGDIR/rounds.txt"
run_rowlock_latency() {
    put_queue "$ENQ_PORT" "$Q-$1"
    log "round $1: latency, ROWLOCK_NOTIFY=true, POLL_INTERVAL_MS=$POLL_INTERVAL_MS, $JOBS jobs"
    MODE=rowlock ENQ_URL=http://127.0.0.1:$ENQ_PORT CLAIM_URL=http://127.0.0.1:$CLAIM_PORT \
        QUEUE="$Q-$1" JOBS=$JOBS node "$HERE/latency/latency.js" |
        sed "s/^/round=$1 notify=on  /" | tee -a "$ROUNDS_OUT"
}
run_graphile_latency() {
    [ "$PEERS" = 1 ] || return 0
    log "round $1: graphile-worker add_job-to-start latency, $JOBS jobs, same database"
    NODE_PATH="$NPM_DIR/node_modules" MODE=graphile DATABASE_URL="$ROWLOCK_DATABASE_URL" \
        JOBS=$JOBS node "$HERE/latency/latency.js" | sed "s/^/round=$1 /" | tee -a "$ROUNDS_OUT"
}
for ((round = 1; round <= ROUNDS; round++)); do
    if ((round % 2 == 1)); then
        run_rowlock_latency "$round"
        run_graphile_latency "$round"
    else
        run_graphile_latency "$round"
        run_rowlock_latency "$round"
    fi
done
awk -f "$HERE/latency/summary.awk" "$ROUNDS_OUT"
cleanup

start_pair false
put_queue "$ENQ_PORT" "$Q-off"
log "latency, ROWLOCK_NOTIFY=false (the re-check alone), $OFF_JOBS jobs"
MODE=rowlock ENQ_URL=http://127.0.0.1:$ENQ_PORT CLAIM_URL=http://127.0.0.1:$CLAIM_PORT \
    QUEUE="$Q-off" JOBS=$OFF_JOBS node "$HERE/latency/latency.js" | sed 's/^/notify=off /'
cleanup

# Throughput: one process with notifications on, one with them off, on the same database, run
# alternately (TPUT_ROUNDS each, which one first swapped every round) so that neither gets the
# younger, smaller tables or always the first turn.
PIDS=()
start_rowlock true
ON_PORT=$PORT
start_rowlock false
OFF_PORT=$PORT
log "enqueue throughput, $CLIENTS clients, ${SECONDS_EACH} s each, notifications on and off"
for ((round = 1; round <= TPUT_ROUNDS; round++)); do
    order="on off" # odd rounds on first, even rounds off first: neither always runs first
    ((round % 2 == 1)) || order="off on"
    for batch in 1 50; do
        for mode in $order; do
            port=$ON_PORT
            [ "$mode" = on ] || port=$OFF_PORT
            put_queue "$port" "tput-$$-$mode-$batch-$round"
            MODE=throughput ENQ_URL=http://127.0.0.1:$port QUEUE="tput-$$-$mode-$batch-$round" \
                BATCH=$batch SECONDS=$SECONDS_EACH CLIENTS=$CLIENTS \
                node "$HERE/latency/latency.js" | sed "s/^/notify=$mode round=$round enqueue /"
        done
    done
done
cleanup
PIDS=()

# Why the NOTIFY is sent after COMMIT on the listener's connection: the same one-row insert
# transaction through pgbench (CLIENTS clients, TPUT_SECONDS each, twice), alone and with a
# pg_notify inside it, as a writer's own NOTIFY would be. The NOTIFY takes a database-wide lock
# at commit that committing writers queue behind.
PGBENCH=$(pg_tool pgbench)
if [ -n "$PGBENCH" ]; then
    probe=latency_notify_probe_$$
    psql -q "$ROWLOCK_DATABASE_URL" -c "CREATE TABLE $probe (id bigserial PRIMARY KEY, v int)"
    printf 'BEGIN;\nINSERT INTO %s (v) VALUES (1);\nCOMMIT;\n' "$probe" >"$LOGDIR/plain.sql"
    printf 'BEGIN;\nINSERT INTO %s (v) VALUES (1);\nSELECT pg_notify(%s, %s);\nCOMMIT;\n' \
        "$probe" "'rowlock_wake'" "'queue:q' || :client_id" >"$LOGDIR/in-tx.sql"
    log "insert transactions with and without a NOTIFY inside (pgbench, $CLIENTS clients)"
    for round in 1 2; do
        for script in plain in-tx; do
            tps=$("$PGBENCH" -n -c "$CLIENTS" -j 2 -T "$SECONDS_EACH" -f "$LOGDIR/$script.sql" \
                "$ROWLOCK_DATABASE_URL" 2>/dev/null | awk '/^tps/ { printf "%d", $3 }')
            printf 'pgbench round=%s insert %-6s tps=%s\n' "$round" "$script" "$tps"
        done
    done
    psql -q "$ROWLOCK_DATABASE_URL" -c "DROP TABLE $probe"
fi
