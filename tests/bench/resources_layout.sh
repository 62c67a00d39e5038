#!/usr/bin/env bash
# tests/bench/resources_layout.sh: storage layouts for many topics compared on the produce of a
# compacted topic (insert the message with an offset from the topic's sequence, upsert the key's
# head), in SQL alone under pgbench, every request on one topic and then on a random one of N:
#   per-topic   today's layout: tables m_<t> and h_<t> per topic, statements naming them. A
#               connection that keeps a prepared statement per topic is what rowlock does with a
#               warm cache (pertopic-prepared: N x 2 statements per backend, run through a
#               function whose plans PL/pgSQL caches per table name); one that cannot keep them
#               plans every statement (pertopic-planned: EXECUTE, the cache-miss path).
#   shared      one table of messages and one of heads keyed by topic id, one prepared statement
#               for every topic; the offsets still come from a sequence per topic (nextval on its
#               name), which keeps the gap-safe log reads as they are.
#   partitioned the shared tables partitioned by list of topic id, a partition per topic.
#   counter     the shared tables, the offsets from a counter row per topic (rowlock.topics
#               could hold it) taken in a transaction of its own before the produce's, as a
#               sequence is taken outside the transaction: what a sequence per topic would cost
#               if it were a row. Run as a procedure that commits after the counter.
#   oneseq      the shared tables with one sequence for every topic: NOT gap-safe with today's
#               reads (a reader records the gaps between a topic's offsets as holes, and other
#               topics' offsets would all be gaps); it bounds what the sequence per topic costs.
# Each layout's two statements run inside one PL/pgSQL function call (one round trip, as
# rowlock's pipelines are), so that the layouts differ in nothing else.
# Reported: transactions/s of each, and the private memory of pgbench's backends after the run.
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/resources_layout.sh
#
# Environment: ROWLOCK_DATABASE_URL (a database to connect to; the bench creates BENCH_DB,
# default rowlock_layout_bench, beside it and drops it at exit), N (topics, default 1000),
# DURATION (seconds a run, default 5), CLIENTS (default 4), LAYOUTS (default "shared partitioned
# prepared planned counter oneseq"; the per-topic ones create 2 N tables, slow for N of 10,000),
# ROUNDS (default 1). Reports; asserts nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"
readonly N="${N:-1000}" DURATION="${DURATION:-5}" CLIENTS="${CLIENTS:-4}" ROUNDS="${ROUNDS:-1}"
readonly LAYOUTS="${LAYOUTS:-shared partitioned prepared planned counter oneseq}"
readonly BENCH_DB="${BENCH_DB:-rowlock_layout_bench}"
log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'resources_layout.sh: error: %s\n' "$*" >&2
    exit 1
}
[ -n "${ROWLOCK_DATABASE_URL:-}" ] || die "ROWLOCK_DATABASE_URL is required"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
per_topic=0 partitioned=0
for l in $LAYOUTS; do
    case $l in
    prepared | planned) per_topic=1 ;;
    partitioned) partitioned=1 ;;
    shared | counter | oneseq) ;;
    *) die "unknown layout '$l'" ;;
    esac
done
ensure_pg_tools psql pgbench
PSQL=$(pg_tool psql) PGBENCH=$(pg_tool pgbench)
URL=$(sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$BENCH_DB#" <<<"$ROWLOCK_DATABASE_URL")
WORK=$(mktemp -d)
cleanup() {
    "$PSQL" -X -q -d "$ROWLOCK_DATABASE_URL" -c "DROP DATABASE IF EXISTS $BENCH_DB" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
[ "${DEBUG:-0}" = 1 ] && set -x
"$PSQL" -X -q -d "$ROWLOCK_DATABASE_URL" -c "DROP DATABASE IF EXISTS $BENCH_DB" >/dev/null 2>&1
"$PSQL" -X -q -d "$ROWLOCK_DATABASE_URL" -c "CREATE DATABASE $BENCH_DB" >/dev/null

# produce_function NAME MESSAGES HEADS OFFSET: the produce of a layout whose messages and heads
# are keyed by topic id (the function produce_NAME), its offset drawn by the SQL OFFSET
produce_function() {
    cat <<SQL
CREATE FUNCTION produce_$1(t int, k text) RETURNS void LANGUAGE plpgsql AS \$f\$
DECLARE o bigint;
BEGIN
    INSERT INTO $2 (topic_id, "offset", key, value)
        VALUES (t, $4, k, '{"n":1}') RETURNING "offset" INTO o;
    INSERT INTO $3 (topic_id, key, head_id) VALUES (t, k, o)
        ON CONFLICT (topic_id, key) DO UPDATE SET head_id = EXCLUDED.head_id, updated_at = now();
END \$f\$;
SQL
}

log "creating $N topics in the layouts: $LAYOUTS"
# every layout: the shared tables, a sequence per topic, a counter row per topic
"$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$URL" >/dev/null <<SQL
CREATE TABLE shared_m (topic_id int, "offset" bigint, key text, value jsonb,
    created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (topic_id, "offset"));
CREATE TABLE shared_h (topic_id int, key text, head_id bigint,
    updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (topic_id, key)) WITH (fillfactor = 80);
DO \$\$ BEGIN FOR t IN 1..$N LOOP
    EXECUTE format('CREATE SEQUENCE s_%s', t);
END LOOP; END \$\$;
CREATE TABLE counters (topic_id int PRIMARY KEY, next bigint NOT NULL) WITH (fillfactor = 50);
INSERT INTO counters SELECT t, 0 FROM generate_series(1, $N) t;
-- counters' offsets start far above the sequences' so that the layouts share shared_m
CREATE SEQUENCE one_s START 1000000000000;
-- the shared layout: the same two statements, one plan for every topic
$(produce_function shared shared_m shared_h "nextval(('s_' || t)::regclass)")
$(produce_function oneseq shared_m shared_h "nextval('one_s')")
-- the counter is taken and committed first (its own transaction: a procedure called at top level
-- may commit), then the produce's two statements run in the next transaction
CREATE PROCEDURE produce_counter(t int, k text) LANGUAGE plpgsql AS \$f\$
DECLARE o bigint;
BEGIN
    UPDATE counters SET next = next + 1 WHERE topic_id = t RETURNING next + 2000000000000 INTO o;
    COMMIT;
    INSERT INTO shared_m (topic_id, "offset", key, value) VALUES (t, o, k, '{"n":1}');
    INSERT INTO shared_h (topic_id, key, head_id) VALUES (t, k, o)
        ON CONFLICT (topic_id, key) DO UPDATE SET head_id = EXCLUDED.head_id, updated_at = now();
END \$f\$;
SQL
if [ "$partitioned" = 1 ]; then
    # partitioning: the shared tables' shape, a list partition of each per topic
    "$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$URL" >/dev/null <<SQL
CREATE TABLE part_m (topic_id int, "offset" bigint, key text, value jsonb,
    created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (topic_id, "offset"))
    PARTITION BY LIST (topic_id);
CREATE TABLE part_h (topic_id int, key text, head_id bigint,
    updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (topic_id, key))
    PARTITION BY LIST (topic_id);
DO \$\$ BEGIN FOR t IN 1..$N LOOP
    EXECUTE format('CREATE TABLE part_m_%s PARTITION OF part_m FOR VALUES IN (%s)', t, t);
    EXECUTE format('CREATE TABLE part_h_%s PARTITION OF part_h FOR VALUES IN (%s)', t, t);
END LOOP; END \$\$;
$(produce_function partitioned part_m part_h "nextval(('s_' || t)::regclass)")
SQL
fi
if [ "$per_topic" = 1 ]; then
    # per-topic tables, and the planned path: every statement parsed and planned at each call
    "$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$URL" >/dev/null <<SQL
DO \$\$ BEGIN FOR t IN 1..$N LOOP
    EXECUTE format('CREATE TABLE m_%s ("offset" bigint PRIMARY KEY, key text, value jsonb,
        created_at timestamptz NOT NULL DEFAULT now())', t);
    EXECUTE format('CREATE TABLE h_%s (key text PRIMARY KEY, head_id bigint,
        updated_at timestamptz NOT NULL DEFAULT now()) WITH (fillfactor = 80)', t);
END LOOP; END \$\$;
CREATE FUNCTION produce_planned(t int, k text) RETURNS void LANGUAGE plpgsql AS \$f\$
DECLARE o bigint;
BEGIN
    EXECUTE format('INSERT INTO m_%s ("offset", key, value) VALUES (nextval(''s_%s''), \$1, ''{"n":1}'') RETURNING "offset"', t, t) INTO o USING k;
    EXECUTE format('INSERT INTO h_%s (key, head_id) VALUES (\$1, \$2) ON CONFLICT (key) DO UPDATE SET head_id = EXCLUDED.head_id, updated_at = now()', t) USING k, o;
END \$f\$;
SQL
    # the prepared path: a function per topic, whose statements PL/pgSQL prepares once per backend
    "$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$URL" >/dev/null <<SQL
DO \$\$ BEGIN FOR t IN 1..$N LOOP
    EXECUTE format(\$f\$CREATE FUNCTION produce_%s(k text) RETURNS void LANGUAGE plpgsql AS \$b\$
    DECLARE o bigint;
    BEGIN
        INSERT INTO m_%s ("offset", key, value) VALUES (nextval('s_%s'), k, '{"n":1}') RETURNING "offset" INTO o;
        INSERT INTO h_%s (key, head_id) VALUES (k, o) ON CONFLICT (key) DO UPDATE SET head_id = EXCLUDED.head_id, updated_at = now();
    END \$b\$
    \$f\$, t, t, t, t);
END LOOP; END \$\$;
CREATE FUNCTION produce_prepared(t int, k text) RETURNS void LANGUAGE plpgsql AS \$f\$
BEGIN EXECUTE format('SELECT produce_%s(\$1)', t) USING k; END \$f\$;
SQL
fi

for layout in shared partitioned oneseq; do
    printf '\\set t random(1, :n)\n\\set r random(1, 1000000000)\nSELECT produce_%s(:t, %s);\n' \
        "$layout" "'k' || :r" >"$WORK/$layout.sql"
done
printf '\\set t random(1, :n)\n\\set r random(1, 1000000000)\nCALL produce_counter(:t, %s);\n' "'k' || :r" >"$WORK/counter.sql"
printf '\\set t random(1, :n)\n\\set r random(1, 1000000000)\nSELECT produce_planned(:t, %s);\n' "'k' || :r" >"$WORK/planned.sql"
printf '\\set t random(1, :n)\n\\set r random(1, 1000000000)\nSELECT produce_prepared(:t, %s);\n' "'k' || :r" >"$WORK/prepared.sql"

# run LAYOUT NTOPICS: "tps memory"
run() {
    local out pids kb max=0
    "$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -T "$DURATION" -D n="$2" -f "$WORK/$1.sql" "$URL" \
        >"$WORK/out" 2>&1 &
    local bench=$!
    sleep "$((DURATION - 1))"
    pids=$("$PSQL" -X -At -d "$URL" -c "SELECT pid FROM pg_stat_activity WHERE datname = '$BENCH_DB' AND application_name = 'pgbench'")
    for p in $pids; do
        kb=$(awk '/^Private_(Clean|Dirty):/ { s += $2 } END { print s + 0 }' /proc/"$p"/smaps_rollup 2>/dev/null || echo 0)
        [ "$kb" -gt "$max" ] && max=$kb
    done
    wait "$bench" || die "pgbench failed: $(tail -n 3 "$WORK/out")"
    out=$(awk '/^tps/ { printf "%.0f", $3 }' "$WORK/out")
    printf '%s %.1f\n' "$out" "$(awk -v k="$max" 'BEGIN { print k / 1024 }')"
}

printf '\n| layout | 1 topic: tx/s, backend MiB | random of %s: tx/s, backend MiB | ratio |\n|---|---|---|---|\n' "$N"
# each run on fresh connections (pgbench's): what a pooled connection retired past its bound
# starts from; with ROUNDS above 1 the layouts alternate, each round in the same order
for ((r = 1; r <= ROUNDS; r++)); do
    for layout in $LAYOUTS; do
        read -r one mem1 < <(run "$layout" 1)
        read -r many memn < <(run "$layout" "$N")
        printf '| %s | %s, %s | %s, %s | %s |\n' "$layout" "$one" "$mem1" "$many" "$memn" \
            "$(awk -v a="$one" -v b="$many" 'BEGIN { if (a > 0) printf "%.2fx", b / a }')"
    done
done
