#!/usr/bin/env bash
# tests/bench/queues.sh: end-to-end throughput of leased work queues (jobs/s for JOBS no-op jobs,
# every one verified done exactly once) through rowlock, beside the same SQL driven by pgbench on
# the same PostgreSQL in the same run (the ceiling), and beside two Node.js queues from the npm
# registry, graphile-worker and pg-boss, each in its fastest documented configuration.
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/queues.sh
#
# Systems (SYSTEMS, all by default, in this order), each on a queue of its own holding JOBS jobs
# enqueued before the clock starts (so enqueue and processing never overlap; each enqueue is
# timed and reported on its own), then VACUUM ANALYZE of its tables (the same for every system),
# then timed from the moment the workers start to the moment the last job is done (committed):
#   rowlock-1       tests/bench/queues/worker.c, WORKERS threads with a keep-alive connection
#                   each, looping POST /queues/Q/leases {owner, max_jobs: 1} then
#                   POST /queues/Q/leases/{id}/complete {owner, fence}
#   rowlock-batch   the same with max_jobs: BATCH, every claimed job settled by one
#                   POST /queues/Q/leases:complete {owner, items: [{job_id, fence}...]}
#   rowlock-deleted rowlock-batch on a queue that keeps no succeeded job
#                   (succeeded_retention_seconds 0): each completion deletes its job, body and
#                   attempt history in its own statement, as graphile-worker does
#   rowlock-keys    rowlock-batch with jobs spread over KEYED_KEYS (100) concurrency keys, on a
#                   queue without limits: what carrying a key costs (each claimed job with a key
#                   gets an entry in jobs_leased_key, the index the keys' counts read)
#   rowlock-keyed   rowlock-keys with a per-key concurrency limit that never binds, KEYED_LIMIT
#                   (1000) a key, above what WORKERS x BATCH can hold; the claims run as a
#                   limited queue's do (db/leases.c, the limited claim: the queue's row locked,
#                   claims one at a time): what the limit costs
#   rowlock-chain   rowlock-batch on jobs enqueued as chains of ENQUEUE_BATCH (each request one
#                   chain: every job waits for the one before it, named by ref), so that only
#                   each chain's head is claimable; each completion releases the next job
#   rowlock-fanin   the same with each request a fan-in: its last job waits for all the others
#                   (49 parents when ENQUEUE_BATCH is 50). Run with ENQUEUE_BATCH=50 and
#                   rowlock-batch for the graphs' enqueue and processing beside plain jobs
#   rowlock-large   for reference: the same with LARGE_WORKERS (4) workers and max_jobs
#                   LARGE_BATCH (500), the shape of the peers' fastest configurations
#   pgbench-batch   the ceiling: pgbench -M prepared, CLIENTS clients, each transaction of the
#                   script the statements rowlock issues for one claim and one settlement, in
#                   its transactions and round trips: BEGIN and the queue resolve; the claim (max
#                   BATCH, owner from :client_id) and COMMIT; BEGIN and the resolve; the batch
#                   completion of the claimed ids and fences and COMMIT (pgbench pipelines). The claim's rows are carried to the completion by
#                   \gset: its final SELECT is wrapped to aggregate them (count, array_agg of ids
#                   and fences); nothing else of the statement changes
#   pgbench-combined
#                   the ceiling of what rowlock runs when its workers' claims and settlements
#                   arrive together and are combined (db/combine.h): COMBINE_CLIENTS (2)
#                   clients, each transaction one st_claim_many for WORKERS / COMBINE_CLIENTS
#                   owners of BATCH jobs each, then one batch completion of all it claimed, in
#                   pgbench-batch's round trips. pgbench-batch stays the stated ceiling: each
#                   worker's own statements, as rowlock runs them when nothing is combined
#   pgbench-auto    for reference: pgbench-batch with PostgreSQL's default plan cache mode (auto:
#                   custom plans until a generic one is as cheap), whatever rowlock sets
#   pgbench-bare    for reference: the claim and the batch completion alone, each its own
#                   implicit transaction (no BEGIN, resolve or COMMIT round trips)
#   pgbench-1       for reference, rowlock-1's twin: claim max 1, then the single completion
#   graphile-worker tests/bench/queues/graphile.js: addJobs, then run() with concurrentJobs
#                   GW_CONCURRENCY (24), maxPoolSize +1, localQueue.size GW_LOCAL_QUEUE (500),
#                   completeJobBatchDelay = failJobBatchDelay = GW_COMPLETE_DELAY (0): the
#                   configuration of its documented performance run
#   pg-boss         tests/bench/queues/pgboss.js: insert, then PGBOSS_WORKERS (4) loops of
#                   fetch(batchSize: PGBOSS_BATCH (500)) and complete(ids): the fastest of the
#                   configurations tried on the 2-core machine (16 x 50 ran at a third of it;
#                   PGBOSS_MODE=work uses its polling work() instead, which sleeps out a 0.5 s
#                   minimum polling interval between batches)
# The SQL in the pgbench scripts is taken from db/queues.c and db/leases.c at every run (the C
# preprocessor expands their fragments; the string literals of st_queue_resolve, st_claim, st_complete and
# st_complete_batch are concatenated), so the ceiling always runs the statements rowlock runs;
# only the parameters become pgbench variables or expressions. pgbench's sessions get the plan
# cache mode rowlock sets on its pooled connections (the "SET plan_cache_mode = ..." of
# db/pool.c, read at every run; PGBENCH_PGOPTIONS overrides), so they run the same plans.
#
# Measuring it the way it runs in production: PIN=1 puts PostgreSQL (its postmaster,
# so every backend) on CPU 0 and everything else (rowlock, the workers, pgbench, node) on CPU 1
# with taskset (tests/bench/lib.sh pin_postgres; the cluster's masks are put back at exit), so
# the database is the bottleneck of every system, as on a deployment with a database server of
# its own. Use a cluster nobody else uses: pinning a shared one slows its other users, and the
# WAL figures below are the whole cluster's. PIN=0 (the default) leaves the cores shared.
# Each timed run lasts at least MIN_S (default 10) seconds: every system first runs once off the
# record with JOBS jobs, and its rounds then get as many jobs as its rate gives in MIN_S, and
# half as many again (a round that still ends sooner is marked, and the next gets more).
# MIN_S=0: every run JOBS jobs. Beside jobs/s (best and median of the rounds) each system's report gives what
# the database did a job: PostgreSQL CPU (the postmaster and all its children, from /proc), WAL
# bytes (pg_current_wal_lsn difference) and, from pg_waldump --stats over the same span, heap
# tuples inserted, updated (non-HOT, HOT), deleted and row locks written, and B-tree entries
# inserted.
#
# Targets, for rowlock batch-BATCH (printed PASS or BELOW): >= 0.6 of the pgbench ceiling,
# >= graphile-worker, >= 2x pg-boss; and for the limit, rowlock-keyed >= 0.9 of rowlock-keys (the
# same jobs without a limit). For reference (no target), rowlock-keys and rowlock-keyed over
# rowlock-batch: the key's cost, and the key's and the limit's together.
#
# Done exactly once: for the rowlock and pgbench runs, SQL over the queue's jobs: JOBS rows, all
# succeeded, none with attempts > 1, exactly one attempt-history row each, ended 'completed'
# (and for rowlock, the worker's own count of each payload index handed out: exactly 1 each).
# For graphile-worker (which deletes a job once done): every payload index handled exactly once,
# no job attempt > 1, no job row left. For pg-boss: every payload index handled exactly once,
# JOBS rows state 'completed', none with retry_count > 0.
#
# Environment: ROWLOCK_DATABASE_URL (required; rowlock's database: the bench creates its queues
# there, each deleted once measured), JOBS (default 20000; with MIN_S
# the calibration run's), MIN_S, PIN (above), PIN_PG_CPU and PIN_REST_CPU (PIN=1's CPUs, default
# 0 and 1), WORKERS (rowlock worker threads,
# default 16), BATCH (default 50), LARGE_WORKERS, LARGE_BATCH (above), ENQUEUE_BATCH (jobs per
# enqueue request, default 1000), THREADS (ROWLOCK_THREADS, default 8), POOL
# (ROWLOCK_POOL_SIZE, default 16), CLIENTS (pgbench clients, default WORKERS), COMBINE_CLIENTS
# (above), SYSTEMS (default
# all, above), PEERS_DATABASE_URL (the database graphile-worker and pg-boss get, created afresh
# for each and dropped at exit; default: ROWLOCK_DATABASE_URL's database name + "_peers", in the
# same cluster), NPM_DIR (where the npm peers are installed, default .rowlock/bench-queues-npm,
# git-ignored, from tests/bench/queues/package-lock.json), GW_CONCURRENCY, GW_LOCAL_QUEUE,
# GW_COMPLETE_DELAY, PGBOSS_MODE, PGBOSS_WORKERS, PGBOSS_BATCH, PGBENCH_PGOPTIONS (above),
# TIMEOUT_S (per run, default 600), ROUNDS (default 1, 3 with PIN=1: every system that many
# times, in turn; each system's best round is reported, with the median and every round's jobs/s
# beside it: on a shared machine one round can be caught by someone else's load), ROWLOCK_LOG_LEVEL (default info, so access logs
# are written, to a file), KEEP_LOGS=1 (keep that file, the outputs and the pgbench scripts;
# removed at exit otherwise), KEEP_DATA=1 (keep the bench queues and the peers database),
# BUILD_DIR (default build). Benchmarks report, they do not assert: the exit status is 0
# whatever the ratios, non-zero only when something could not be built, started or measured, or
# a run did not process every job exactly once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
readonly ROOT
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"
readonly HERE="$ROOT/tests/bench/queues"
readonly BUILD="${BUILD_DIR:-$ROOT/build}"
readonly BASE_JOBS="${JOBS:-20000}"
JOBS=$BASE_JOBS # the run's job count: BASE_JOBS, or what MIN_S asks of the system (below)
readonly MIN_S="${MIN_S:-10}"
readonly PIN="${PIN:-0}"
readonly WORKERS="${WORKERS:-16}"
readonly BATCH="${BATCH:-50}"
readonly ENQUEUE_BATCH="${ENQUEUE_BATCH:-1000}"
readonly THREADS="${THREADS:-8}"
readonly POOL="${POOL:-16}"
readonly CLIENTS="${CLIENTS:-$WORKERS}"
readonly COMBINE_CLIENTS="${COMBINE_CLIENTS:-2}"
readonly GW_CONCURRENCY="${GW_CONCURRENCY:-24}"
readonly GW_LOCAL_QUEUE="${GW_LOCAL_QUEUE:-500}"
readonly GW_COMPLETE_DELAY="${GW_COMPLETE_DELAY:-0}"
readonly PGBOSS_MODE="${PGBOSS_MODE:-fetch}"
readonly PGBOSS_WORKERS="${PGBOSS_WORKERS:-4}"
readonly PGBOSS_BATCH="${PGBOSS_BATCH:-500}"
readonly LARGE_WORKERS="${LARGE_WORKERS:-4}"
readonly LARGE_BATCH="${LARGE_BATCH:-500}"
readonly KEYED_KEYS="${KEYED_KEYS:-100}"
readonly KEYED_LIMIT="${KEYED_LIMIT:-1000}"
readonly TIMEOUT_S="${TIMEOUT_S:-600}"
readonly ROUNDS="${ROUNDS:-$((PIN == 1 ? 3 : 1))}"
readonly BUDGET=4194304 # ROWLOCK_RESPONSE_BUDGET's default, bound by the pgbench claims
readonly LOG_LEVEL="${ROWLOCK_LOG_LEVEL:-info}"
readonly KEEP_LOGS="${KEEP_LOGS:-0}" KEEP_DATA="${KEEP_DATA:-0}"
readonly NPM_DIR="${NPM_DIR:-$ROOT/.rowlock/bench-queues-npm}"
ALL_SYSTEMS="rowlock-1 rowlock-batch rowlock-deleted rowlock-keys rowlock-keyed rowlock-chain rowlock-fanin rowlock-large pgbench-batch pgbench-combined pgbench-auto"
ALL_SYSTEMS="$ALL_SYSTEMS pgbench-bare"
readonly ALL_SYSTEMS="$ALL_SYSTEMS pgbench-1 graphile-worker pg-boss"
readonly SYSTEMS="${SYSTEMS:-$ALL_SYSTEMS}"
readonly PGBENCH_JOBS=2 WARMUP_JOBS=2000
readonly TARGET_CEILING=0.60 TARGET_GRAPHILE=1.00 TARGET_PGBOSS=2.00

log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'queues.sh: error: %s\n' "$*" >&2
    exit 1
}

for v in BASE_JOBS WORKERS BATCH ENQUEUE_BATCH THREADS POOL CLIENTS GW_CONCURRENCY GW_LOCAL_QUEUE \
    PGBOSS_WORKERS PGBOSS_BATCH LARGE_WORKERS LARGE_BATCH TIMEOUT_S ROUNDS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
[[ $MIN_S =~ ^[0-9]+$ ]] || die "MIN_S is whole seconds (0: every run JOBS jobs)"
case $PIN in 0 | 1) ;; *) die "PIN is 0 or 1" ;; esac
[[ $GW_COMPLETE_DELAY =~ ^(-1|[0-9]+)$ ]] || die "GW_COMPLETE_DELAY is -1 or milliseconds"
{ [ "$BATCH" -le 1000 ] && [ "$ENQUEUE_BATCH" -le 1000 ] && [ "$LARGE_BATCH" -le 1000 ]; } ||
    die "BATCH, LARGE_BATCH and ENQUEUE_BATCH are at most 1000 (rowlock's batch limit)"
[ "$BATCH" -gt 1 ] || die "BATCH must be at least 2 (rowlock-1 is the one-job run)"
[ "$CLIENTS" -ge "$PGBENCH_JOBS" ] || die "CLIENTS must be at least $PGBENCH_JOBS"
case $PGBOSS_MODE in fetch | work) ;; *) die "PGBOSS_MODE is fetch or work" ;; esac
want() { [[ " $SYSTEMS " == *" $1 "* ]]; }
for s in $SYSTEMS; do
    [[ " $ALL_SYSTEMS " == *" $s "* ]] || die "unknown system '$s' in SYSTEMS ($ALL_SYSTEMS)"
done
PEERS=0
if want graphile-worker || want pg-boss; then PEERS=1; fi
readonly PEERS

if [ -z "${ROWLOCK_DATABASE_URL:-}" ]; then
    cat >&2 <<'EOF'
queues.sh: error: ROWLOCK_DATABASE_URL is not set.
This bench runs rowlock, pgbench, graphile-worker and pg-boss against the same PostgreSQL, so it
needs a database rowlock may use (it applies or checks its schema at startup; the bench creates
queues there and deletes them at exit) in a cluster where that user may create a database (for
graphile-worker and pg-boss). Set ROWLOCK_DATABASE_URL to its libpq URL, e.g.
  ROWLOCK_DATABASE_URL='postgresql:///rowlock?host=/path/to/sock&user=rowlock' tests/bench/queues.sh
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
for tool in cc pkg-config curl; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "$tool is missing (apt-get install build-essential pkg-config curl)"
done
if ! pkg-config --exists libcurl jansson libpq; then
    apt_install libcurl4-openssl-dev libjansson-dev libpq-dev ||
        die "libcurl, jansson or libpq headers are missing" \
            "(apt-get install libcurl4-openssl-dev libjansson-dev libpq-dev)"
fi
if [ "$PEERS" = 1 ]; then
    { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } ||
        die "node and npm are needed for graphile-worker and pg-boss (apt-get install nodejs" \
            "npm), or leave them out of SYSTEMS"
fi

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

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rowlock-bench-queues.XXXXXX")"
readonly WORK
readonly ROWLOCK_LOG="$WORK/rowlock.log" WORKER_BIN="$WORK/worker"

log "compiling tests/bench/queues/worker.c"
# shellcheck disable=SC2046 # pkg-config prints several flags
cc -std=c11 -O2 -Wall -o "$WORKER_BIN" "$HERE/worker.c" \
    $(pkg-config --cflags --libs libcurl jansson) -lpthread >&2 ||
    die "cannot compile tests/bench/queues/worker.c"

# The npm peers, installed from the lock file into NPM_DIR (git-ignored), again only when the
# lock file changed.
if [ "$PEERS" = 1 ]; then
    if ! cmp -s "$HERE/package-lock.json" "$NPM_DIR/package-lock.json" ||
        ! cmp -s "$HERE/package.json" "$NPM_DIR/package.json" ||
        [ ! -d "$NPM_DIR/node_modules/graphile-worker" ] ||
        [ ! -d "$NPM_DIR/node_modules/pg-boss" ]; then
        log "installing graphile-worker and pg-boss (npm ci in $NPM_DIR)"
        mkdir -p "$NPM_DIR"
        cp "$HERE/package.json" "$HERE/package-lock.json" "$NPM_DIR/"
        (cd "$NPM_DIR" && npm ci --no-audit --no-fund >&2) || {
            rm -f "$NPM_DIR/package-lock.json"
            die "npm ci failed in $NPM_DIR"
        }
    fi
    GW_VERSION=$(node -p "require('$NPM_DIR/node_modules/graphile-worker/package.json').version")
    PGBOSS_VERSION=$(node -p "require('$NPM_DIR/node_modules/pg-boss/package.json').version")
fi

# The peers' database: ROWLOCK_DATABASE_URL with its database name + "_peers" (a URL of the form
# postgresql://[...]/NAME[?...]), unless PEERS_DATABASE_URL names one.
PEERS_URL="${PEERS_DATABASE_URL:-}"
if [ "$PEERS" = 1 ] && [ -z "$PEERS_URL" ]; then
    [[ $DB_URL =~ ^(postgres(ql)?://[^/?]*/)([^/?]+)(\?.*)?$ ]] ||
        die "cannot derive the peers' database from ROWLOCK_DATABASE_URL; set PEERS_DATABASE_URL"
    PEERS_URL="${BASH_REMATCH[1]}${BASH_REMATCH[3]}_peers${BASH_REMATCH[4]}"
fi
PEERS_DB=""
if [ "$PEERS" = 1 ]; then
    [[ $PEERS_URL =~ ^postgres(ql)?://[^/?]*/([^/?]+) ]] ||
        die "PEERS_DATABASE_URL is not a postgresql://.../NAME URL"
    PEERS_DB=${BASH_REMATCH[2]}
    [ "$PEERS_DB" != "$(sql 'SELECT current_database()')" ] ||
        die "the peers' database must not be rowlock's"
    [[ $PEERS_DB =~ ^[A-Za-z0-9_]+$ ]] || die "the peers' database name '$PEERS_DB' is not plain"
fi
readonly PEERS_URL PEERS_DB

# ---------------------------------------------------------------------------------------------
# The SQL rowlock issues, as pgbench scripts

# stmt_sql NAME: the SQL of `static const struct db_stmt NAME` in db/queues.c or db/leases.c, its
# fragments expanded by the C preprocessor, its string literals concatenated and unescaped; on a
# second line the statement's parameter count.
stmt_sql() {
    awk -v name="$1" '
    function lits(line,    s, out) {
        out = ""
        while (match(line, /"([^"\\]|\\.)*"/)) {
            s = substr(line, RSTART + 1, RLENGTH - 2)
            gsub(/\\"/, "\"", s); gsub(/\\\\/, "\\", s)
            out = out "\002" s
            line = substr(line, RSTART + RLENGTH)
        }
        return out
    }
    !on && index($0, "struct db_stmt " name " =") { on = 1 }
    on {
        body = body lits($0); tail = tail " " $0
        if ($0 ~ /}[ \t]*;[ \t]*$/) {
            n = split(body, piece, "\002"); out = ""
            for (i = 3; i <= n; i++) out = out piece[i]
            sub(/}[ \t]*;[ \t]*$/, "", tail); m = split(tail, w, /[ ,\t]+/)
            for (i = m; i > 0 && w[i] == ""; i--) ;
            printf "%s\n%s\n", out, w[i]; exit
        }
    }' "$WORK/queues.i"
}

# load_stmt VAR NAME NPARAMS: VAR gets statement NAME's SQL; the run stops if it is not found or
# its parameter count is not NPARAMS (the composition below binds exactly those).
load_stmt() {
    local out text count
    out=$(stmt_sql "$2") || die "cannot read $2 from the preprocessed db/queues.c and db/leases.c"
    text=$(head -n 1 <<<"$out")
    count=$(sed -n 2p <<<"$out")
    [ -n "$text" ] || die "no statement $2 in db/queues.c or db/leases.c"
    [ "$count" = "$3" ] ||
        die "$2 in db/leases.c takes $count parameters, not $3: update compose() in queues.sh"
    printf -v "$1" '%s' "$text"
}
# shellcheck disable=SC2046 # pkg-config prints several flags
for f in queues leases; do
    cc -E -P -I"$ROOT" $(pkg-config --cflags libpq jansson) "$ROOT/db/$f.c" ||
        die "cannot preprocess db/$f.c"
done >"$WORK/queues.i"
load_stmt SQL_RESOLVE st_queue_resolve 1
load_stmt SQL_CLAIM st_claim 5
load_stmt SQL_COMPLETE st_complete 5
load_stmt SQL_COMPLETE_BATCH st_complete_batch 5
load_stmt SQL_CLAIM_MANY st_claim_many 6

# compose KIND: the pgbench script of KIND (batch, bare, single or combined).
# Variables: :client_id (pgbench's), :queue and :qid (the queue's name and id, -D), :batch
# (max_jobs, -D); from the claim, by \gset: :n (jobs claimed), :ids and :fences (their array
# literals, in claim order), :id and :fence (the first, for the single completion).
# The owner, a text parameter in rowlock, is 'pgbench-' || :client_id. The claim's final SELECT
# (the rows rowlock reads) is wrapped in an aggregate so that \gset gets one row; data-modifying
# CTEs must stay at the top level, so the statement cannot be wrapped whole. The batch
# completion's owner and result arrays (rowlock binds '{owner,...}' and '{NULL,...}', the
# worker sending no result) are built with array_fill; its ids and fences are the claim's
# arrays; the single completion's result is NULL likewise. $4 of the claim (lease seconds) is
# rowlock's NULL parameter (the queue's default), as a NULL literal; $5 (the payload byte budget)
# is BUDGET, rowlock's default ROWLOCK_RESPONSE_BUDGET. combined: st_claim_many
# for :k owners ('pgbench-' || :client_id || '-' || claim number) of :batch each, then one
# batch completion of everything claimed (each row's owner from the claim it was dealt to, as
# :owners), in the round trips of batch.
# shellcheck disable=SC2016 # '$1' and the like are the statements' parameters, not bash's
compose() {
    local kind=$1 owner="('pgbench-' || :client_id::text)" prefix final claim resolve done_sql
    prefix=${SQL_CLAIM%) SELECT *}
    final=${SQL_CLAIM##*) SELECT }
    { [ "$prefix" != "$SQL_CLAIM" ] && [ "$final" != "$SQL_CLAIM" ]; } ||
        die "compose: cannot find the final SELECT of st_claim"
    claim="$prefix) SELECT count(*) AS n, coalesce(array_agg(r.id), '{}') AS ids,"
    claim+=" coalesce(array_agg(r.fence), '{}') AS fences, coalesce(min(r.id), 0) AS id,"
    claim+=" coalesce(min(r.fence), 0) AS fence FROM (SELECT $final) r"
    claim=$(bind "$claim" '$1' ':qid' '$2' "$owner" '$3' ':batch' '$4' 'NULL' '$5' "$BUDGET")
    if [ "$kind" = combined ]; then
        prefix=${SQL_CLAIM_MANY%) SELECT *}
        final=${SQL_CLAIM_MANY##*) SELECT }
        { [ "$prefix" != "$SQL_CLAIM_MANY" ] && [ "$final" != "$SQL_CLAIM_MANY" ]; } ||
            die "compose: cannot find the final SELECT of st_claim_many"
        claim="$prefix) SELECT count(*) AS n, coalesce(array_agg(r.id), '{}') AS ids,"
        claim+=" coalesce(array_agg(r.fence), '{}') AS fences,"
        claim+=" coalesce(array_agg($owner || '-' || r.i), '{}') AS owners FROM (SELECT $final) r"
        claim=$(bind "$claim" '$1' ':qid' \
            '$2' "(SELECT array_agg($owner || '-' || g) FROM generate_series(1, :k::int) g)" \
            '$3' 'array_fill(:batch::int, ARRAY[:k::int])' \
            '$4' 'array_fill(NULL::float8, ARRAY[:k::int])' '$5' '(:batch::int * :k::int)' \
            '$6' "array_fill($BUDGET::bigint, ARRAY[:k::int])")
    fi
    resolve=$(bind "$SQL_RESOLVE" '$1' ':queue')
    if [ "$kind" = single ]; then
        done_sql=$(bind "$SQL_COMPLETE" '$1' ':id' '$2' ':qid' '$3' "$owner" '$4' ':fence' \
            '$5' 'NULL')
    elif [ "$kind" = combined ]; then
        done_sql=$(bind "$SQL_COMPLETE_BATCH" '$1' ':qid' '$2' ':ids' '$3' ':owners' \
            '$4' ':fences' '$5' "array_fill(NULL::text, ARRAY[:n::int])")
    else
        done_sql=$(bind "$SQL_COMPLETE_BATCH" '$1' ':qid' '$2' ':ids' \
            '$3' "array_fill($owner, ARRAY[:n::int])" '$4' ':fences' \
            '$5' "array_fill(NULL::text, ARRAY[:n::int])")
    fi
    local script
    if [ "$kind" = bare ]; then
        script=$(printf '%s \\gset\n\\if :n > 0\n%s;\n\\endif\n' "$claim" "$done_sql")
    else
        # rowlock's round trips: BEGIN and the resolve; the claim and COMMIT; BEGIN and the
        # resolve; the completion and COMMIT. \gset is not allowed in a pgbench pipeline, so the
        # claim goes alone and its COMMIT goes with the next BEGIN: as many round trips.
        script=$(printf '\\startpipeline\nBEGIN;\n%s;\n\\endpipeline\n%s \\gset\n' "$resolve" \
            "$claim"
            printf '\\if :n > 0\n\\startpipeline\nCOMMIT;\nBEGIN;\n%s;\n\\endpipeline\n' \
                "$resolve"
            printf '\\startpipeline\n%s;\nCOMMIT;\n\\endpipeline\n\\else\nCOMMIT;\n\\endif\n' \
                "$done_sql")
    fi
    # pgbench takes every :name as a variable, even inside a string literal: the ':' of the
    # to_char formats become \x3A in an E'' literal, the same constant once parsed.
    local fmt="'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'"
    script=${script//"$fmt"/"E'YYYY-MM-DD\"T\"HH24\\x3AMI\\x3ASS.US\"Z\"'"}
    local stray
    stray=$(grep -oE '\$[0-9]+' <<<"$script" | sort -u | tr '\n' ' ' || true)
    [ -z "$stray" ] || die "compose $kind: unbound $stray"
    # shellcheck disable=SC1003 # '^\\' is a regular expression (a line starting with \)
    stray=$(grep -v '^\\' <<<"$script" | grep -oE '(^|[^:]):[A-Za-z_][A-Za-z0-9_]*' |
        sed 's/^[^:]*://' | grep -vxE 'client_id|queue|qid|batch|k|n|ids|fences|owners|id|fence' |
        sort -u | tr '\n' ' ' || true)
    [ -z "$stray" ] || die "compose $kind: unknown pgbench variables $stray"
    printf '%s\n' "$script"
}
for kind in batch bare single combined; do compose "$kind" >"$WORK/pgbench-$kind.sql"; done

# The session settings rowlock gives its pooled connections that change plans, for pgbench.
if [ -z "${PGBENCH_PGOPTIONS+set}" ]; then
    PGBENCH_PGOPTIONS=$(grep -oE 'plan_cache_mode *= *[a-z_]+' "$ROOT/db/pool.c" | head -n 1 |
        sed -E 's/ *= */=/; s/^/-c /' || true)
fi
readonly PGBENCH_PGOPTIONS

# ---------------------------------------------------------------------------------------------
# rowlock

ROWLOCK_PID=""
QUEUES=()
PEERS_CREATED=0

# Deletes the bench queues (their jobs, bodies and attempt history go with them, ON DELETE
# CASCADE) and drops the peers' database.
drop_data() {
    [ "$KEEP_DATA" != 1 ] || return 0
    if [ "${#QUEUES[@]}" -gt 0 ]; then
        local list
        list=$(printf '"%s",' "${QUEUES[@]}")
        sql "DELETE FROM rowlock.queues WHERE name = ANY('{${list%,}}'::text[])" >/dev/null ||
            log "could not delete the bench queues ${QUEUES[*]}"
        QUEUES=()
    fi
    if [ "$PEERS_CREATED" = 1 ]; then
        sql "DROP DATABASE IF EXISTS \"$PEERS_DB\" WITH (FORCE)" >/dev/null ||
            log "could not drop the database $PEERS_DB"
        PEERS_CREATED=0
    fi
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
on_exit() {
    stop_server "$ROWLOCK_PID"
    ROWLOCK_PID=""
    drop_data
    pin_restore
    # At level info the log grows by every request's access line: not kept unless asked for.
    [ "$KEEP_LOGS" = 1 ] || rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# PIN=1: PostgreSQL on CPU 0, this script and all it starts from here on (rowlock, the workers,
# pgbench, node) on CPU 1 (tests/bench/lib.sh).
[ "$PIN" = 0 ] || pin_postgres "$PSQL" "$DB_URL"

fail_server() {
    printf 'queues.sh: error: rowlock did not start or does not answer; the end of %s:\n' \
        "$ROWLOCK_LOG" >&2
    tail -n 5 "$ROWLOCK_LOG" >&2 || true
    if grep -q 'incompatible database schema' "$ROWLOCK_LOG" 2>/dev/null; then
        cat >&2 <<'EOF'
The database in ROWLOCK_DATABASE_URL holds another version of rowlock's schema. Point
ROWLOCK_DATABASE_URL at a fresh, empty database of the same cluster (rowlock applies its schema
to it at startup), e.g. after: psql "<the cluster>" -c 'CREATE DATABASE rowlock_bench_q'
EOF
    fi
    exit 1
}

alive() { kill -0 "$ROWLOCK_PID" 2>/dev/null || fail_server; }

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

# new_queue LABEL [CONFIG]: creates a fresh queue (PUT /queues/Q with CONFIG, by default {}: 30 s
# leases, 5 attempts, finished jobs kept), named after LABEL, this process and the round, and
# sets QUEUE to its name, QUEUE_ID to its id.
new_queue() {
    QUEUE="bench-$1-$$-r${round:-0}"
    QUEUES+=("$QUEUE")
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' --data-binary "${2:-"{}"}" \
        "$BASE/queues/$QUEUE" || die "PUT /queues/$QUEUE failed"
    QUEUE_ID=$(sql "SELECT id FROM rowlock.queues WHERE name = '$QUEUE'")
    [[ $QUEUE_ID =~ ^[0-9]+$ ]] || die "no id for queue $QUEUE in rowlock.queues"
}

# enqueue: JOBS jobs into QUEUE over HTTP, ENQUEUE_BATCH a request; prints the seconds it took.
enqueue() {
    local out
    out=$("$WORKER_BIN" enqueue "$BASE" "$QUEUE" "$JOBS" "$ENQUEUE_BATCH" ${ENQUEUE_KEYS:-}) || {
        alive
        die "enqueueing into $QUEUE failed"
    }
    [ "$(kv enqueued "$out")" = "$JOBS" ] || die "enqueue: $out"
    kv seconds "$out"
}

# done_queue: deletes QUEUE once measured and checked (unless KEEP_DATA=1), so that every run
# starts from the same tables (then vacuumed), not from the jobs of the runs before it.
done_queue() {
    [ "$KEEP_DATA" != 1 ] || return 0
    sql "DELETE FROM rowlock.queues WHERE id = $QUEUE_ID" >/dev/null || die "cannot delete $QUEUE"
    local -a rest=()
    local q
    for q in "${QUEUES[@]}"; do [ "$q" = "$QUEUE" ] || rest+=("$q"); done
    QUEUES=("${rest[@]}")
}

# A checkpoint falls due after enough WAL; taken as each system's run starts (before its
# enqueue, the same for every system), it is less likely to land inside one system's run (it needs superuser or pg_checkpoint; without, the runs just stay noisier).
checkpoint() { sql 'CHECKPOINT' >/dev/null 2>&1 || true; }

vacuum_rowlock() {
    sql 'VACUUM (ANALYZE) rowlock.jobs, rowlock.job_bodies, rowlock.job_attempts' >/dev/null ||
        die "VACUUM ANALYZE of rowlock's queue tables failed"
}

# kv KEY TEXT: the value of KEY=value in TEXT.
kv() { grep -oE "(^| )$1=[^ ]*" <<<"$2" | head -n 1 | sed 's/^ *[^=]*=//'; }

# check_rowlock_schema: the exactly-once check of QUEUE_ID in SQL, as key=value: total,
# succeeded, attempts_gt1, history (attempt rows), completed_history (rows ended 'completed'),
# not_one_history (jobs without exactly one attempt row), db_span (s, first claim to last
# completion as the database recorded them).
check_rowlock_schema() {
    sql "WITH j AS (SELECT id, state, attempts, finished_at FROM rowlock.jobs
                    WHERE queue_id = $QUEUE_ID),
              a AS (SELECT a.job_id, a.outcome, a.claimed_at FROM rowlock.job_attempt_history a
                    JOIN j ON j.id = a.job_id),
              per AS (SELECT j.id, count(a.job_id) AS n FROM j LEFT JOIN a ON a.job_id = j.id
                      GROUP BY j.id)
         SELECT 'total=' || (SELECT count(*) FROM j)
             || ' succeeded=' || (SELECT count(*) FROM j WHERE state = 'succeeded')
             || ' attempts_gt1=' || (SELECT count(*) FROM j WHERE attempts > 1)
             || ' history=' || (SELECT count(*) FROM a)
             || ' completed_history=' || (SELECT count(*) FROM a WHERE outcome = 'completed')
             || ' not_one_history=' || (SELECT count(*) FROM per WHERE n <> 1)
             || ' db_span=' || coalesce(round(extract(epoch FROM (SELECT max(finished_at) FROM j)
                    - (SELECT min(claimed_at) FROM a))::numeric, 3)::text, '0')"
}

# metric NAME [LABELS]: a value from rowlock's /metrics.
metrics_snapshot() { curl -fsS "$BASE/metrics" 2>/dev/null || true; }
metric() {
    awk -v n="$1" '$1 == n { print $2; found = 1; exit } END { if (!found) print 0 }' <<<"$2"
}

# Busy and total clock ticks of the whole machine (/proc/stat's first line).
machine_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat
}
CLK_TCK=$(getconf CLK_TCK)
readonly CLK_TCK

# PostgreSQL's CPU time, when the cluster runs on this machine and its data directory is
# readable: the postmaster's own and its reaped children's (fields 14-17 of its stat), plus its
# live children's (backends, pgbench's and the peers' included): clock ticks, "" otherwise.
PG_PM=""
pg_dir=""
if pg_dir=$(sql 'SHOW data_directory' 2>/dev/null) && [ -r "$pg_dir/postmaster.pid" ]; then
    PG_PM=$(head -n 1 "$pg_dir/postmaster.pid")
    [[ $PG_PM =~ ^[0-9]+$ ]] && [ -r "/proc/$PG_PM/stat" ] || PG_PM=""
fi
readonly PG_PM pg_dir
# A script, as the Node.js peers run it too (PG_TICKS_CMD), around their timed part. It also
# appends the cluster's WAL position (a byte count) to $WORK/wal.pos, for wal_records.
cat >"$WORK/pg_ticks" <<EOF
#!/usr/bin/env bash
# prints PostgreSQL's CPU clock ticks (see tests/bench/queues.sh), nothing when unknown
$(printf '%q' "$PSQL") -X -At -d $(printf '%q' "$DB_URL") \
    -c "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn" >>$(printf '%q' "$WORK/wal.pos") || true
[ -n "$PG_PM" ] || exit 0
cat /proc/[0-9]*/stat 2>/dev/null | awk -v pm="$PG_PM" '
    { pid = \$1; sub(/^.*\\) /, "") }
    pid == pm { t += \$12 + \$13 + \$14 + \$15 }
    \$2 == pm { t += \$12 + \$13 }
    END { print t + 0 }'
EOF
chmod +x "$WORK/pg_ticks"
pg_ticks() { "$WORK/pg_ticks"; }
# wal_of: what the cluster wrote between the first and the last position in $WORK/wal.pos (the
# run's two pg_ticks calls), as wal_records prints it (tests/bench/lib.sh); the file is emptied.
wal_of() {
    local a b
    a=$(head -n 1 "$WORK/wal.pos" 2>/dev/null) b=$(tail -n 1 "$WORK/wal.pos" 2>/dev/null)
    : >"$WORK/wal.pos"
    { [[ $a =~ ^[0-9]+$ ]] && [[ $b =~ ^[0-9]+$ ]] && [ -n "$pg_dir" ]; } || return 0
    wal_records "$pg_dir" "$a" "$b"
}
# us_per_job SECONDS: microseconds a job.
us_per_job() { awk -v c="$1" -v n="$JOBS" 'BEGIN { printf "%.0f", c / n * 1e6 }'; }
# per_job TICKS_BEFORE TICKS_AFTER: microseconds of CPU a job, or "-".
per_job() {
    if [ -z "$1" ] || [ -z "$2" ]; then
        echo -
    else
        awk -v a="$1" -v b="$2" -v hz="$CLK_TCK" -v n="$JOBS" 'BEGIN {
            printf "%.0f", (b - a) / hz / n * 1e6 }'
    fi
}

# access_stats QUEUE: per route of rowlock's access log under /queues/QUEUE/: requests, non-2xx,
# p50 and p99 of duration_ms (the server's time from request to response).
access_stats() {
    grep -F "\"path\":\"/queues/$1/" "$ROWLOCK_LOG" | grep -F '"msg":"request"' |
        sed -E 's/.*"route":"([^"]*)".*"status":([0-9]+).*"duration_ms":([0-9.]+).*/\1 \2 \3/' |
        sort -k1,1 -k3,3n | awk '
        function flush() {
            if (route == "") return
            p50 = v[int((n - 1) * 0.5) + 1]; p99 = v[int((n - 1) * 0.99) + 1]
            printf "    %-40s %7d requests %6d non-2xx   server p50 %6.2f ms  p99 %7.2f ms\n",
                route, n, bad, p50, p99
        }
        $1 != route { flush(); route = $1; n = 0; bad = 0 }
        { v[++n] = $3; if ($2 !~ /^2/) bad++ }
        END { flush() }'
}

declare -A RES ENQ CHECK OK DETAIL PGC CLI SRV SECS WAL

# run_rowlock SYSTEM MAX_JOBS WORKERS [QUEUE_CONFIG]: with a config of succeeded retention 0,
# the jobs are gone once done, and the check is that none is left, the service counted JOBS
# deleted at completion, and the workers completed each payload once.
run_rowlock() {
    local system=$1 max=$2 workers=$3 config=${4:-} enq out chk m0 m1 c0 c1 mt0 mt1 p0 p1 rc=0
    checkpoint
    new_queue "$system" "$config"
    enq=$(enqueue)
    vacuum_rowlock
    log "$system: $workers workers, max_jobs $max, $JOBS jobs (queue $QUEUE, enqueued in ${enq}s)"
    m0=$(metrics_snapshot)
    c0=$(cpu_ticks "$ROWLOCK_PID") || alive
    mt0=$(machine_ticks)
    : >"$WORK/wal.pos"
    p0=$(pg_ticks)
    out=$("$WORKER_BIN" work "$BASE" "$QUEUE" "$JOBS" "$workers" "$max" "$TIMEOUT_S") || rc=$?
    p1=$(pg_ticks)
    c1=$(cpu_ticks "$ROWLOCK_PID") || alive
    WAL[$system]=$(wal_of)
    mt1=$(machine_ticks)
    m1=$(metrics_snapshot)
    alive
    printf '%s\n' "$out" >"$WORK/$system.txt"
    [ -n "$out" ] || die "$system: the worker printed nothing (exit $rc)"
    [ "$rc" = 0 ] || log "$system: the worker reports a failure (exit $rc): $out"
    chk=$(check_rowlock_schema)
    DETAIL[$system]=$(access_stats "$QUEUE")
    done_queue
    RES[$system]=$(kv jobs_per_s "$out")
    SECS[$system]=$(kv seconds "$out")
    ENQ[$system]=$(awk -v s="$enq" -v n="$JOBS" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
    PGC[$system]=$(per_job "$p0" "$p1")
    SRV[$system]=$(per_job "$c0" "$c1")
    CLI[$system]=$(us_per_job "$(kv cpu_s "$out")")
    if [[ $config == *succeeded_retention_seconds* ]]; then
        check_deleted "$system" "$rc" "$out" "$chk" "$m0" "$m1"
    else
        check_kept "$system" "$rc" "$out" "$chk"
    fi
    DETAIL[$system]=$(run_detail "$system" "$out" "$chk" "$c0" "$c1" "$mt0" "$mt1" "$m0" "$m1")
    log "$system: ${RES[$system]} jobs/s (${OK[$system]})"
}

# check_kept SYSTEM RC OUT CHK: every job succeeded once, with one attempt, kept.
check_kept() {
    local system=$1 rc=$2 out=$3 chk=$4
    CHECK[$system]="succeeded $(kv succeeded "$chk")/$JOBS, attempts>1: $(kv attempts_gt1 "$chk"),"
    CHECK[$system]+=" attempt rows $(kv history "$chk") ($(kv completed_history "$chk") completed,"
    CHECK[$system]+=" jobs without exactly 1: $(kv not_one_history "$chk")), handed out not once:"
    CHECK[$system]+=" $(kv not_once "$out"), conflicts $(kv conflicts "$out")"
    if [ "$rc" = 0 ] && [ "$(kv total "$chk")" = "$JOBS" ] &&
        [ "$(kv succeeded "$chk")" = "$JOBS" ] &&
        [ "$(kv attempts_gt1 "$chk")" = 0 ] && [ "$(kv history "$chk")" = "$JOBS" ] &&
        [ "$(kv completed_history "$chk")" = "$JOBS" ] && [ "$(kv not_one_history "$chk")" = 0 ] &&
        [ "$(kv not_once "$out")" = 0 ] && [ "$(kv completed "$out")" = "$JOBS" ]; then
        OK[$system]=OK
    else
        OK[$system]=FAILED
    fi
}

# check_deleted SYSTEM RC OUT CHK M0 M1: no job left, JOBS deleted at completion by the
# service's counter, every payload handed out and completed once.
check_deleted() {
    local system=$1 rc=$2 out=$3 chk=$4 del
    del=$(awk -v a="$(metric 'rowlock_queue_jobs_deleted_at_end_total{state="succeeded"}' "$5")" \
        -v b="$(metric 'rowlock_queue_jobs_deleted_at_end_total{state="succeeded"}' "$6")" \
        'BEGIN { printf "%.0f", b - a }')
    CHECK[$system]="completed $(kv completed "$out")/$JOBS, deleted at completion $del, rows left"
    CHECK[$system]+=" $(kv total "$chk"), handed out not once: $(kv not_once "$out"), conflicts"
    CHECK[$system]+=" $(kv conflicts "$out")"
    if [ "$rc" = 0 ] && [ "$(kv total "$chk")" = 0 ] && [ "$del" = "$JOBS" ] &&
        [ "$(kv not_once "$out")" = 0 ] && [ "$(kv completed "$out")" = "$JOBS" ] &&
        [ "$(kv conflicts "$out")" = 0 ]; then
        OK[$system]=OK
    else
        OK[$system]=FAILED
    fi
}

# run_detail SYSTEM OUT CHK C0 C1 MT0 MT1 M0 M1: the run's requests, latencies, CPU, pool and
# combining (after DETAIL[SYSTEM], its access log statistics), as text.
run_detail() {
    local system=$1 out=$2 chk=$3 c0=$4 c1=$5 mt0=$6 mt1=$7 m0=$8 m1=$9
    local d
    d=$(awk -v o="$out" -v s="$(kv db_span "$chk")" -v n="$JOBS" -v c=$((c1 - c0)) \
        -v hz="$CLK_TCK" -v mt0="$mt0" -v mt1="$mt1" -v sys="$system" -v cores="$(nproc --all)" 'BEGIN {
        split(o, f, " "); for (i in f) { split(f[i], kvp, "="); v[kvp[1]] = kvp[2] }
        split(mt0, a, " "); split(mt1, b, " ")
        busy = (b[2] - a[2]) > 0 ? (b[1] - a[1]) / (b[2] - a[2]) * 100 : 0
        printf "  %s: %.3f s by the workers\047 clock", sys, v["seconds"]
        printf " (%.3f s first claim to last completion in the database);\n", s
        printf "    %d requests: %d claims (%d empty), %d settlements;", v["requests"], v["claims"],
            v["empty_claims"], v["settles"]
        printf " client p50/p99: claim %.2f/%.2f ms, settle %.2f/%.2f ms\n", v["claim_p50_ms"],
            v["claim_p99_ms"], v["settle_p50_ms"], v["settle_p99_ms"]
        printf "    rowlock CPU %.1f us/job, %.1f us/request;", c / hz / n * 1e6,
            (v["requests"] > 0 ? c / hz / v["requests"] * 1e6 : 0)
        printf " machine CPU busy %.0f%% of %d cores\n", busy, cores
    }')
    d+=$'\n'"${DETAIL[$system]}"
    d+=$'\n'"$(awk -v a0="$(metric rowlock_db_pool_acquires_total "$m0")" \
        -v a1="$(metric rowlock_db_pool_acquires_total "$m1")" \
        -v w0="$(metric rowlock_db_pool_acquire_waits_total "$m0")" \
        -v w1="$(metric rowlock_db_pool_acquire_waits_total "$m1")" \
        -v k0="$(metric rowlock_db_pool_connected "$m1")" \
        -v r0="$(metric rowlock_db_transaction_retries_total "$m0")" \
        -v r1="$(metric rowlock_db_transaction_retries_total "$m1")" 'BEGIN {
        printf "    pool: %d acquires, %d waited for a connection, %d connections open;", a1 - a0,
            w1 - w0, k0
        printf " %d transaction retries", r1 - r0 }')"
    d+=$'\n'"$(awk -v c0="$(metric 'rowlock_queue_combined_calls_total{kind="claim"}' "$m0")" \
        -v c1="$(metric 'rowlock_queue_combined_calls_total{kind="claim"}' "$m1")" \
        -v t0="$(metric 'rowlock_queue_combined_transactions_total{kind="claim"}' "$m0")" \
        -v t1="$(metric 'rowlock_queue_combined_transactions_total{kind="claim"}' "$m1")" \
        -v s0="$(metric 'rowlock_queue_combined_calls_total{kind="settlement"}' "$m0")" \
        -v s1="$(metric 'rowlock_queue_combined_calls_total{kind="settlement"}' "$m1")" \
        -v u0="$(metric 'rowlock_queue_combined_transactions_total{kind="settlement"}' "$m0")" \
        -v u1="$(metric 'rowlock_queue_combined_transactions_total{kind="settlement"}' "$m1")" '
        BEGIN {
        printf "    combined: %d claims in %d transactions (%.1f each), %d settlements in %d",
            c1 - c0, t1 - t0, (t1 > t0 ? (c1 - c0) / (t1 - t0) : 0), s1 - s0, u1 - u0
        printf " (%.1f each)", (u1 > u0 ? (s1 - s0) / (u1 - u0) : 0) }')"
    printf '%s\n' "$d"
}

# run_pgbench SYSTEM KIND MAX_JOBS [PGOPTIONS [CLIENTS [K]]]: K claims of MAX_JOBS a transaction
# (the combined kind)
run_pgbench() {
    local system=$1 kind=$2 max=$3 options=${4-$PGBENCH_PGOPTIONS} clients=${5:-$CLIENTS}
    local k=${6:-1}
    local enq out chk tps txs failed per p0 p1 cpu rc=0
    checkpoint
    new_queue "$system"
    enq=$(enqueue)
    vacuum_rowlock
    # enough transactions for every client to claim its share, and two more each: a claim gets
    # max jobs while that many are unclaimed (SKIP LOCKED), so the queue is empty before the end
    per=$(((JOBS + max * k * clients - 1) / (max * k * clients) + 2))
    log "$system: pgbench -M prepared -c$clients -j$PGBENCH_JOBS -t$per (max $max x $k, queue" \
        "$QUEUE)${options:+, PGOPTIONS=$options}"
    : >"$WORK/wal.pos"
    p0=$(pg_ticks)
    # pgbench's own CPU time: the subshell's `times`, whose last line is its children's
    out=$(
        PGOPTIONS="$options" \
            "$PGBENCH" -n -M prepared -c "$clients" -j "$PGBENCH_JOBS" -t "$per" \
            -D queue="$QUEUE" -D qid="$QUEUE_ID" -D batch="$max" -D k="$k" \
            -f "$WORK/pgbench-$kind.sql" \
            "$DB_URL" 2>&1 || exit $?
        times
    ) || rc=$?
    p1=$(pg_ticks)
    WAL[$system]=$(wal_of)
    cpu=""
    if [ "$rc" = 0 ]; then
        cpu=$(tail -n 1 <<<"$out" | awk '{
            t = 0
            for (i = 1; i <= 2; i++) {
                split($i, p, "m"); sub(/s$/, "", p[2]); t += p[1] * 60 + p[2]
            }
            print t }')
        out=$(head -n -2 <<<"$out")
    fi
    printf '%s\n' "$out" >"$WORK/$system.txt"
    [ "$rc" = 0 ] || {
        printf '%s\n' "$out" | tail -n 20 >&2
        die "pgbench failed ($system; the script: $WORK/pgbench-$kind.sql, kept with KEEP_LOGS=1)"
    }
    tps=$(awk '/^tps = / { print $3; exit }' <<<"$out")
    txs=$(awk -F': ' '/^number of transactions actually processed/ { print $2 }' <<<"$out")
    txs=${txs%%/*}
    failed=$(awk -F': ' '/^number of failed transactions/ { split($2, a, " "); print a[1] }' \
        <<<"$out")
    { [ -n "$tps" ] && [ -n "$txs" ]; } ||
        die "cannot read tps and transactions from pgbench ($system)"
    chk=$(check_rowlock_schema)
    done_queue
    # elapsed: transactions / tps (pgbench's time without the connections' setup)
    RES[$system]=$(awk -v t="$txs" -v tps="$tps" -v s="$(kv succeeded "$chk")" 'BEGIN {
        e = tps > 0 ? t / tps : 0; printf "%.1f", (e > 0 ? s / e : 0) }')
    SECS[$system]=$(awk -v t="$txs" -v tps="$tps" 'BEGIN { printf "%.3f", (tps > 0 ? t / tps : 0) }')
    ENQ[$system]=$(awk -v s="$enq" -v n="$JOBS" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
    PGC[$system]=$(per_job "$p0" "$p1")
    CLI[$system]=$(us_per_job "$cpu")
    CHECK[$system]="succeeded $(kv succeeded "$chk")/$JOBS, attempts>1: $(kv attempts_gt1 "$chk"),"
    CHECK[$system]+=" attempt rows $(kv history "$chk") ($(kv completed_history "$chk") completed,"
    CHECK[$system]+=" jobs without exactly 1: $(kv not_one_history "$chk"))"
    if [ "$(kv total "$chk")" = "$JOBS" ] && [ "$(kv succeeded "$chk")" = "$JOBS" ] &&
        [ "$(kv attempts_gt1 "$chk")" = 0 ] && [ "$(kv history "$chk")" = "$JOBS" ] &&
        [ "$(kv completed_history "$chk")" = "$JOBS" ] && [ "$(kv not_one_history "$chk")" = 0 ] &&
        [ "${failed:-0}" = 0 ]; then
        OK[$system]=OK
    else
        OK[$system]=FAILED
    fi
    DETAIL[$system]=$(awk -v t="$txs" -v tps="$tps" -v c="$clients" -v s="$(kv db_span "$chk")" \
        -v f="${failed:-0}" -v sys="$system" 'BEGIN {
        printf "  %s: %.3f s (%d transactions of %d clients at %.1f tps, %d failed;", sys,
            (tps > 0 ? t / tps : 0), t, c, tps, f
        printf " %.3f s first claim to last completion in the database)", s }')
    log "$system: ${RES[$system]} jobs/s (${OK[$system]})"
}

# run_peer SYSTEM SCRIPT [VAR=VALUE]...: a Node.js peer on a fresh database of its own.
run_peer() {
    local system=$1 script=$2 out p0 p1 rc=0
    shift 2
    checkpoint
    sql "DROP DATABASE IF EXISTS \"$PEERS_DB\" WITH (FORCE)" >/dev/null
    sql "CREATE DATABASE \"$PEERS_DB\"" >/dev/null || die "cannot create the database $PEERS_DB"
    PEERS_CREATED=1
    log "$system: $JOBS jobs ($*), database $PEERS_DB"
    : >"$WORK/wal.pos"
    # the peer prints pg_ticks before and after its timed part: it runs that command
    out=$(env NODE_PATH="$NPM_DIR/node_modules" DATABASE_URL="$PEERS_URL" JOBS="$JOBS" \
        TIMEOUT_S="$TIMEOUT_S" PG_TICKS_CMD="$WORK/pg_ticks" "$@" node "$HERE/$script" \
        2>"$WORK/$system.err") || rc=$?
    printf '%s\n' "$out" >"$WORK/$system.txt"
    if [ -z "$out" ]; then
        tail -n 20 "$WORK/$system.err" >&2
        die "$system: tests/bench/queues/$script printed nothing (exit $rc)"
    fi
    [ "$rc" = 0 ] || log "$system: the run reports a failure (exit $rc): $out"
    WAL[$system]=$(wal_of)
    RES[$system]=$(kv jobs_per_s "$out")
    SECS[$system]=$(kv seconds "$out")
    ENQ[$system]=$(awk -v s="$(kv enqueue_seconds "$out")" -v n="$JOBS" 'BEGIN {
        printf "%.0f", (s > 0 ? n / s : 0) }')
    p0=$(kv pg_ticks_before "$out") p1=$(kv pg_ticks_after "$out")
    PGC[$system]=$(per_job "$p0" "$p1")
    CLI[$system]=$(us_per_job "$(kv cpu_s "$out")")
    if [ "$system" = graphile-worker ]; then
        CHECK[$system]="handled $(kv executions "$out")/$JOBS, payloads not handled exactly once:"
        CHECK[$system]+=" $(kv not_once "$out"), max attempt $(kv max_attempts "$out"), job rows"
        CHECK[$system]+=" left $(kv left "$out") (done jobs are deleted)"
    else
        CHECK[$system]="completed $(kv completed "$out")/$JOBS, retried: $(kv retried "$out"),"
        CHECK[$system]+=" payloads not handled exactly once: $(kv not_once "$out")"
    fi
    [ "$rc" = 0 ] && OK[$system]=OK || OK[$system]=FAILED
    DETAIL[$system]="  $system: $(kv seconds "$out") s,"
    DETAIL[$system]+=" first job after $(kv first_job_ms "$out") ms;"
    DETAIL[$system]+=" $(kv config "$out" | tr ',' ' ')"
    log "$system: ${RES[$system]} jobs/s (${OK[$system]})"
}

# warm-up: rowlock's pool connections and prepared statements, off the record
log "warming up rowlock ($WARMUP_JOBS jobs, batch $BATCH)"
new_queue warmup
"$WORKER_BIN" enqueue "$BASE" "$QUEUE" "$WARMUP_JOBS" "$ENQUEUE_BATCH" >/dev/null ||
    die "warm-up enqueue failed"
"$WORKER_BIN" work "$BASE" "$QUEUE" "$WARMUP_JOBS" "$WORKERS" "$BATCH" "$TIMEOUT_S" >/dev/null ||
    die "warm-up run failed"
done_queue

declare -A NAME
NAME[rowlock-1]="rowlock, batch-1"
NAME[rowlock-batch]="rowlock, batch-$BATCH"
NAME[rowlock-deleted]="rowlock, batch-$BATCH, deleted at end"
NAME[rowlock-keys]="rowlock, batch-$BATCH, $KEYED_KEYS keys, no limit"
NAME[rowlock-keyed]="rowlock, batch-$BATCH, $KEYED_KEYS keys limited to $KEYED_LIMIT"
NAME[rowlock-chain]="rowlock, batch-$BATCH, chains of $ENQUEUE_BATCH"
NAME[rowlock-fanin]="rowlock, batch-$BATCH, fan-ins of $ENQUEUE_BATCH"
NAME[rowlock-large]="rowlock, batch-$LARGE_BATCH x $LARGE_WORKERS"
NAME[pgbench-batch]="pgbench ceiling, batch-$BATCH"
NAME[pgbench-combined]="pgbench, combined $COMBINE_CLIENTS x $((WORKERS / COMBINE_CLIENTS)) x $BATCH"
NAME[pgbench-auto]="pgbench, batch-$BATCH, plans auto"
NAME[pgbench-bare]="pgbench, statements alone"
NAME[pgbench-1]="pgbench, batch-1"
NAME[graphile-worker]="graphile-worker ${GW_VERSION:-}, local $GW_LOCAL_QUEUE"
NAME[pg-boss]="pg-boss ${PGBOSS_VERSION:-}, $PGBOSS_BATCH x $PGBOSS_WORKERS"

# keep_best SYSTEM ROUND: after a round of SYSTEM, its figures become the reported ones when its
# jobs/s are the best so far; every round's jobs/s are listed, and a failed round fails it.
declare -A ROUNDS_OF ENQ_OF FAILED_ROUND
keep_best() {
    local system=$1 r=$2 best=${BEST_RES[$1]:-}
    ROUNDS_OF[$system]+="${ROUNDS_OF[$system]:+, }$(printf '%.0f' "${RES[$system]:-0}")"
    ENQ_OF[$system]+="${ENQ_OF[$system]:+, }${ENQ[$system]:-0}"
    [ "${OK[$system]}" = OK ] || FAILED_ROUND[$system]+=" $r"
    if [ -z "$best" ] || awk -v a="${RES[$system]:-0}" -v b="$best" 'BEGIN { exit !(a > b) }'; then
        BEST_RES[$system]=${RES[$system]} BEST_ENQ[$system]=${ENQ[$system]}
        BEST_CHECK[$system]=${CHECK[$system]} BEST_DETAIL[$system]=${DETAIL[$system]}
        BEST_PGC[$system]=${PGC[$system]:-} BEST_CLI[$system]=${CLI[$system]:-}
        BEST_SRV[$system]=${SRV[$system]:-} BEST_WAL[$system]=${WAL[$system]:-}
        BEST_JOBS[$system]=$JOBS BEST_SECS[$system]=${SECS[$system]:-0}
    fi
    PGC_OF[$system]+="${PGC_OF[$system]:+ }${PGC[$system]:--}"
    # a run shorter than MIN_S is marked, and the next round of the system gets more jobs
    if awk -v t="${SECS[$system]:-0}" -v m="$MIN_S" 'BEGIN { exit !(t < m) }'; then
        SHORT[$system]+=" $r"
        scale_jobs "$system"
    fi
}
declare -A BEST_RES BEST_ENQ BEST_CHECK BEST_DETAIL BEST_PGC BEST_CLI BEST_SRV BEST_WAL BEST_JOBS
declare -A BEST_SECS PGC_OF SHORT JOBS_OF

# scale_jobs SYSTEM: after a run of SYSTEM shorter than MIN_S, its job count for the next runs:
# enough for MIN_S at the rate just measured, and half as many again (rounded up to a thousand;
# the rate of a round on a shared machine varies by a third).
scale_jobs() {
    JOBS_OF[$1]=$(awk -v r="${RES[$1]:-0}" -v m="$MIN_S" -v j="$JOBS" 'BEGIN {
        n = r * m * 1.5; n = int((n + 999) / 1000) * 1000; if (n < j) n = j; print n }')
}

# median LIST: the median of numbers separated by ", " or spaces ("-" when none).
median() {
    tr ',' ' ' <<<"$1" | tr -s ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '
        { v[++n] = $1 } END { if (n == 0) print "-"; else if (n % 2) print v[(n + 1) / 2];
        else printf "%.0f\n", (v[n / 2] + v[n / 2 + 1]) / 2 }'
}

# run_system SYSTEM: one run of SYSTEM with JOBS jobs.
run_system() {
    local system=$1
    case $system in
    rowlock-1) run_rowlock "$system" 1 "$WORKERS" ;;
    rowlock-batch) run_rowlock "$system" "$BATCH" "$WORKERS" ;;
    rowlock-deleted)
        run_rowlock "$system" "$BATCH" "$WORKERS" '{"succeeded_retention_seconds": 0}'
        ;;
    rowlock-keys) ENQUEUE_KEYS=$KEYED_KEYS run_rowlock "$system" "$BATCH" "$WORKERS" ;;
    rowlock-chain) ENQUEUE_KEYS=chain run_rowlock "$system" "$BATCH" "$WORKERS" ;;
    rowlock-fanin) ENQUEUE_KEYS=fanin run_rowlock "$system" "$BATCH" "$WORKERS" ;;
    rowlock-keyed)
        ENQUEUE_KEYS=$KEYED_KEYS run_rowlock "$system" "$BATCH" "$WORKERS" \
            "{\"key_limits\": {\"concurrency\": $KEYED_LIMIT}}"
        ;;
    rowlock-large) run_rowlock "$system" "$LARGE_BATCH" "$LARGE_WORKERS" ;;
    pgbench-batch) run_pgbench "$system" batch "$BATCH" ;;
    pgbench-combined)
        run_pgbench "$system" combined "$BATCH" "$PGBENCH_PGOPTIONS" "$COMBINE_CLIENTS" \
            "$((WORKERS / COMBINE_CLIENTS))"
        ;;
    pgbench-auto) run_pgbench "$system" batch "$BATCH" "-c plan_cache_mode=auto" ;;
    pgbench-bare) run_pgbench "$system" bare "$BATCH" ;;
    pgbench-1) run_pgbench "$system" single 1 ;;
    graphile-worker)
        run_peer "$system" graphile.js CONCURRENCY="$GW_CONCURRENCY" LOCAL_QUEUE="$GW_LOCAL_QUEUE" \
            COMPLETE_DELAY="$GW_COMPLETE_DELAY"
        ;;
    pg-boss)
        run_peer "$system" pgboss.js MODE="$PGBOSS_MODE" WORKERS="$PGBOSS_WORKERS" \
            BATCH="$PGBOSS_BATCH"
        ;;
    esac
}

# MIN_S > 0: each system first runs once off the record with BASE_JOBS jobs (a calibration, and
# its warm-up), which sets its job count for the timed rounds to last MIN_S.
for system in $ALL_SYSTEMS; do
    want "$system" || continue
    JOBS_OF[$system]=$BASE_JOBS
    [ "$MIN_S" -gt 0 ] || continue
    JOBS=$BASE_JOBS round=0
    log "$system: calibration run ($JOBS jobs, off the record)"
    run_system "$system"
    [ "${OK[$system]}" = OK ] || die "$system: the calibration run failed"
    scale_jobs "$system"
    log "$system: ${JOBS_OF[$system]} jobs a timed run (${RES[$system]} jobs/s calibrating)"
done

for ((round = 1; round <= ROUNDS; round++)); do
[ "$ROUNDS" = 1 ] || log "round $round of $ROUNDS"
for system in $ALL_SYSTEMS; do
    want "$system" || continue
    JOBS=${JOBS_OF[$system]}
    run_system "$system"
    keep_best "$system" "$round"
done
done

stop_server "$ROWLOCK_PID"
ROWLOCK_PID=""
drop_data
LOG_BYTES=$(wc -c <"$ROWLOCK_LOG")
LOG_LINES=$(wc -l <"$ROWLOCK_LOG")
LOG_WARN=$(grep -cE '"level":"(warn|error)"' "$ROWLOCK_LOG" || true)

# ---------------------------------------------------------------------------------------------
# Report

ceiling=${BEST_RES[pgbench-batch]:-}
echo
[ "$MIN_S" = 0 ] || JOBS="at least ${MIN_S}s of"
printf 'leased queues: %s no-op jobs a system, enqueued first (rowlock: %s a request over HTTP;\n' \
    "$JOBS" "$ENQUEUE_BATCH"
printf 'graphile-worker: addJobs, pg-boss: insert; 1000 a call), then processed against the\n'
printf 'clock.\n'
printf 'rowlock: %s threads, pool %s, log level %s; %s worker threads.\n' "$THREADS" "$POOL" \
    "$LOG_LEVEL" "$WORKERS"
printf 'pgbench -M prepared -c%s -j%s' "$CLIENTS" "$PGBENCH_JOBS"
[ -z "$PGBENCH_PGOPTIONS" ] ||
    printf ', PGOPTIONS="%s" (as rowlock sets its pool)' "$PGBENCH_PGOPTIONS"
printf '.\n'
printf 'PostgreSQL %s (%s), ' "$(sql 'SHOW server_version')" \
    "$(sql "SELECT 'fsync=' || current_setting('fsync') || ', synchronous_commit=' ||
        current_setting('synchronous_commit')")"
if [ "$PIN" = 1 ]; then
    printf 'PIN=1: PostgreSQL on CPU %s, everything else on CPU %s\n' "${PIN_PG_CPU:-0}" \
        "${PIN_REST_CPU:-1}"
else
    printf '%s cores shared by everything\n' "$(nproc --all)"
fi
printf '%-34s %8s %9s %22s %10s  %s\n' "" "" "" "CPU us/job: Postgres," "" ""
printf '%-34s %8s %9s %22s %10s  %s\n' system "jobs/s" "/ceiling" "client, rowlock" "enqueue/s" \
    "done once"
for system in $ALL_SYSTEMS; do
    want "$system" || continue
    ok=OK
    [ -z "${FAILED_ROUND[$system]:-}" ] || ok="FAILED (round${FAILED_ROUND[$system]})"
    awk -v n="${NAME[$system]}" -v r="${BEST_RES[$system]}" -v c="$ceiling" \
        -v e="${BEST_ENQ[$system]}" \
        -v ok="$ok" -v pg="${BEST_PGC[$system]:--}" -v cl="${BEST_CLI[$system]:--}" \
        -v sv="${BEST_SRV[$system]:--}" -v all="${ROUNDS_OF[$system]}" -v rounds="$ROUNDS" 'BEGIN {
        printf "%-34s %8.0f %9s %8s %6s %6s %10s  %s%s\n", n, r,
            (c > 0 ? sprintf("%.3f", r / c) : "-"), pg, cl, sv, e, ok,
            (rounds > 1 ? "  (rounds: " all ")" : "") }'
done

echo
echo "what the database did a job (the best round; PG us/job also as the median of the rounds):"
printf '%-34s %8s %8s %7s %7s %7s %6s %6s %6s %6s %6s %6s %6s  %s\n' system "jobs/s" median "PG us" \
    "median" "WAL B" "FPI B" "h.ins" "h.upd" "h.hot" "h.del" "h.lock" "idx" "jobs, s"
for system in $ALL_SYSTEMS; do
    want "$system" || continue
    w=${BEST_WAL[$system]:-}
    awk -v n="${NAME[$system]}" -v r="${BEST_RES[$system]}" -v med="$(median "${ROUNDS_OF[$system]}")" \
        -v pg="${BEST_PGC[$system]:--}" -v pgm="$(median "${PGC_OF[$system]}")" -v w="$w" \
        -v j="${BEST_JOBS[$system]}" -v t="${BEST_SECS[$system]}" \
        -v short="${SHORT[$system]:+ (<${MIN_S}s: round${SHORT[$system]})}" 'BEGIN {
        split(w, f, " "); for (i in f) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
        printf "%-34s %8.0f %8s %7s %7s ", n, r, med, pg, pgm
        if (w == "") printf "%7s %6s %6s %6s %6s %6s %6s %6s", "-", "-", "-", "-", "-", "-", "-", "-"
        else printf "%7.0f %6.0f %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f", v["wal"] / j, v["fpi"] / j,
            v["heap_ins"] / j, v["heap_upd"] / j, v["heap_hot"] / j, v["heap_del"] / j,
            v["heap_lock"] / j, v["idx_ins"] / j
        printf " %d, %.1f%s\n", j, t, short }'
done
echo "PG us: CPU time of the PostgreSQL cluster (postmaster and all its children: backends,"
echo "autovacuum, checkpointer, WAL writer; /proc) over the timed part, a job. WAL B: bytes of WAL"
echo "written (pg_current_wal_lsn difference), FPI B: of it, full-page images. h.* and idx: WAL"
echo "records a job (pg_waldump --stats=record over the same span): heap tuples inserted, updated"
echo "in a new place (non-HOT: a new entry in every index), updated in place (HOT), deleted, row"
echo "locks written (FOR UPDATE marks the tuple: a WAL record and a dirtied page), and B-tree leaf"
echo "entries inserted. All cluster-wide: run the bench on a cluster nobody else uses."

echo
echo "targets (rowlock, batch-$BATCH):"
target_line() {
    local what=$1 a=$2 b=$3 factor=$4
    if [ -z "$a" ] || [ -z "$b" ]; then
        printf '  %-44s %s\n' "$what" "not measured (SYSTEMS)"
        return
    fi
    awk -v w="$what" -v a="$a" -v b="$b" -v f="$factor" 'BEGIN {
        r = b > 0 ? a / b : 0
        printf "  %-44s %8.0f vs %8.0f: %.2fx (>= %.2fx) %s\n", w, a, b, r, f,
            (r >= f ? "PASS" : "BELOW") }'
}
rb=${BEST_RES[rowlock-batch]:-}
target_line ">= $TARGET_CEILING of the pgbench ceiling" "$rb" "$ceiling" "$TARGET_CEILING"
target_line ">= graphile-worker" "$rb" "${BEST_RES[graphile-worker]:-}" "$TARGET_GRAPHILE"
target_line ">= 2x pg-boss" "$rb" "${BEST_RES[pg-boss]:-}" "$TARGET_PGBOSS"
target_line "per-key limit never binding >= 0.9x no limit" "${BEST_RES[rowlock-keyed]:-}" \
    "${BEST_RES[rowlock-keys]:-}" 0.9
for s in rowlock-keys rowlock-keyed; do
    if [ -n "${BEST_RES[$s]:-}" ] && [ -n "$rb" ]; then
        awk -v s="$s" -v a="${BEST_RES[$s]}" -v b="$rb" 'BEGIN {
            printf "  (no target) %s / rowlock-batch: %.2fx\n", s, (b > 0 ? a / b : 0) }'
    fi
done
for s in rowlock-chain rowlock-fanin; do
    if [ -n "${BEST_RES[$s]:-}" ] && [ -n "$rb" ]; then
        awk -v s="$s" -v a="${BEST_RES[$s]}" -v b="$rb" -v ea="${BEST_ENQ[$s]}" \
            -v eb="${BEST_ENQ[rowlock-batch]}" -v ra="${ENQ_OF[$s]}" \
            -v rb="${ENQ_OF[rowlock-batch]}" 'BEGIN {
            printf "  (no target) %s / rowlock-batch: processed %.2fx, enqueued %.2fx", s,
                (b > 0 ? a / b : 0), (eb > 0 ? ea / eb : 0)
            printf " (enqueue jobs/s by round: %s; plain: %s)\n", ra, rb }'
    fi
done
if [ -n "${BEST_RES[rowlock-1]:-}" ] && [ -n "${BEST_RES[pgbench-1]:-}" ]; then
    awk -v a="${BEST_RES[rowlock-1]}" -v b="${BEST_RES[pgbench-1]}" 'BEGIN {
        printf "  (no target) rowlock batch-1 / pgbench batch-1: %.3f\n", (b > 0 ? a / b : 0) }'
fi

echo
echo "done exactly once (checked after each run):"
for system in $ALL_SYSTEMS; do
    want "$system" || continue
    ok=OK
    [ -z "${FAILED_ROUND[$system]:-}" ] || ok=FAILED
    printf '  %-34s %-6s %s\n' "${NAME[$system]}" "$ok" "${BEST_CHECK[$system]}"
done

echo
echo "details:"
for system in $ALL_SYSTEMS; do
    want "$system" || continue
    printf '%s\n' "${BEST_DETAIL[$system]}"
done
echo "jobs/s: jobs done / time from the workers' start to the last completion committed (rowlock:"
echo "the worker's clock, to the last settlement answered; pgbench: transactions / its tps, i.e."
echo "without connection setup; graphile-worker and pg-boss: their process's clock, until the"
echo "database shows every job done). /ceiling: jobs/s over pgbench's batch-$BATCH jobs/s."
[ "$ROUNDS" = 1 ] || echo "Each system ran $ROUNDS times in turn; its best round is reported" \
    "(details, CPU and checks of that round)."
echo "CPU us/job over the timed part: Postgres (the cluster's postmaster and every backend, so"
echo "also whatever else used that cluster meanwhile), the client (worker.c, pgbench or the node"
echo "process) and rowlock (its process); the machine's $(nproc --all) cores run all three"
[ "$PIN" = 0 ] || echo "(PIN=1: Postgres on one of them, the rest on the other)."
[ -n "$PG_PM" ] || echo "(Postgres CPU: '-', its data directory is not readable here.)"

echo
echo "rowlock's stderr (JSON log at level $LOG_LEVEL; an access-log line a request) went to a file:"
echo "  $ROWLOCK_LOG: $LOG_LINES lines, $LOG_BYTES bytes"
if [ "$LOG_WARN" -gt 0 ]; then
    echo "  $LOG_WARN warn/error lines, the first ones:"
    grep -E '"level":"(warn|error)"' "$ROWLOCK_LOG" | head -n 5 | sed 's/^/    /'
fi
if [ "$KEEP_LOGS" = 1 ]; then
    echo "  kept, with the outputs and the pgbench scripts, in $WORK (remove it with: rm -r $WORK)"
else
    echo "  removed at exit with $WORK (KEEP_LOGS=1 keeps them)"
fi
fail=0
for system in $ALL_SYSTEMS; do
    if want "$system" && [ -n "${FAILED_ROUND[$system]:-}" ]; then fail=1; fi
done
[ "$fail" = 0 ] || {
    echo "queues.sh: a run did not process every job exactly once (see above)" >&2
    exit 1
}
exit 0
