#!/usr/bin/env bash
# tests/bench/memory.sh: how much memory rowlock holds while clients read the largest pages there
# are. A topic gets MESSAGES messages of VALUE_BYTES each (default 110 of 1 MB); then CLIENTS
# concurrent clients (default 16) each read GET /topics/T/messages?after=0&limit=1000, the largest
# page the API allows, ROUNDS times. Reported beside the response budget (ROWLOCK_RESPONSE_BUDGET):
# rowlock's resident memory before the reads, its peak during them (VmHWM, reset before the reads
# through /proc/PID/clear_refs when the kernel allows it, else the peak since start, produce phase
# included, said so), what it keeps afterwards, and the bytes one page carried. A page is bounded
# by the budget, not by limit, so the peak should be a small multiple of CLIENTS x budget above the
# baseline, not of CLIENTS x MESSAGES x VALUE_BYTES.
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/memory.sh
#
# Environment: ROWLOCK_DATABASE_URL (required; its schema must be the build's), BUDGET (bytes,
# default 4194304, rowlock's default), MESSAGES, VALUE_BYTES, CLIENTS, ROUNDS (default 1),
# THREADS (ROWLOCK_THREADS, default 4), WORKERS (ROWLOCK_WORKERS, default 16), BUILD_DIR (default
# build). The bench topic is dropped at exit. Benchmarks report, they do not assert: the exit
# status is non-zero only when something could not be built, started or measured.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
readonly ROOT
log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'memory.sh: %s\n' "$*" >&2
    exit 1
}
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"

readonly BUILD="${BUILD_DIR:-$ROOT/build}"
readonly BUDGET="${BUDGET:-4194304}"
readonly MESSAGES="${MESSAGES:-110}"
readonly VALUE_BYTES="${VALUE_BYTES:-1000000}"
readonly CLIENTS="${CLIENTS:-16}"
readonly ROUNDS="${ROUNDS:-1}"
readonly THREADS="${THREADS:-4}"
readonly WORKERS="${WORKERS:-16}"
[ -n "${ROWLOCK_DATABASE_URL:-}" ] || die "set ROWLOCK_DATABASE_URL"
command -v curl >/dev/null || die "curl is needed"

cmake --build "$BUILD" --target rowlock >&2 || die "build failed"

WORK=$(mktemp -d)
TOPIC="bench-memory-$$"
ROWLOCK_PID=""
PORT=""
on_exit() {
    if [ -n "$PORT" ]; then
        curl -s -o /dev/null -X DELETE "http://127.0.0.1:$PORT/topics/$TOPIC" || true
    fi
    stop_server "$ROWLOCK_PID"
    rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# kB of a /proc/PID/status field (VmRSS, VmHWM)
status_kb() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$ROWLOCK_PID/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

ROWLOCK_LISTEN_ADDRESS=127.0.0.1 ROWLOCK_PORT=0 ROWLOCK_THREADS="$THREADS" \
    ROWLOCK_WORKERS="$WORKERS" ROWLOCK_RESPONSE_BUDGET="$BUDGET" \
    ROWLOCK_BODY_LIMIT=$((VALUE_BYTES + 65536)) ROWLOCK_LOG_LEVEL=warn \
    "$BUILD/rowlock" 2>"$WORK/rowlock.log" &
ROWLOCK_PID=$!
PORT=$(wait_port "$ROWLOCK_PID") || die "rowlock did not start: $(tail -5 "$WORK/rowlock.log")"
BASE="http://127.0.0.1:$PORT"
H='Content-Type: application/json'

curl -sf -o /dev/null -X PUT -H "$H" "$BASE/topics/$TOPIC" -d '{}' || die "cannot create the topic"
log "producing $MESSAGES messages of $VALUE_BYTES bytes"
{
    printf '{"key":"k","value":"'
    head -c $((VALUE_BYTES - 2)) /dev/zero | tr '\0' 'x'
    printf '"}'
} >"$WORK/message.json"
for ((i = 0; i < MESSAGES; i++)); do
    curl -sf -o /dev/null -X POST -H "$H" --data-binary @"$WORK/message.json" \
        "$BASE/topics/$TOPIC/messages" || die "produce $i failed"
done

RSS_BEFORE=$(status_kb VmRSS)
RESET="reset before the reads"
echo 5 >"/proc/$ROWLOCK_PID/clear_refs" 2>/dev/null || RESET="since start: the produce phase included"
log "$CLIENTS clients x $ROUNDS reads of limit=1000"
START=$(date +%s.%N)
CLIENT_PIDS=()
for ((c = 0; c < CLIENTS; c++)); do
    for ((r = 0; r < ROUNDS; r++)); do
        curl -s -o /dev/null -w '%{http_code} %{size_download}\n' \
            "$BASE/topics/$TOPIC/messages?after=0&limit=1000"
    done >"$WORK/client.$c" &
    CLIENT_PIDS+=($!)
done
wait "${CLIENT_PIDS[@]}"
END=$(date +%s.%N)
PEAK=$(status_kb VmHWM)
RSS_AFTER=$(status_kb VmRSS)
read -r OK BYTES < <(cat "$WORK"/client.* | awk '$1 == 200 { n++; b += $2 } END { print n + 0, (n ? b / n : 0) }')

printf '\n%-44s %s\n' "response budget (ROWLOCK_RESPONSE_BUDGET)" "$(mib $((BUDGET / 1024)))"
printf '%-44s %s\n' "messages in the topic" "$MESSAGES of $VALUE_BYTES bytes"
printf '%-44s %s\n' "reads (200 / sent)" "$OK / $((CLIENTS * ROUNDS)), $CLIENTS at once"
printf '%-44s %s\n' "bytes per page" "$(mib $((${BYTES%.*} / 1024)))"
printf '%-44s %s\n' "rowlock RSS before the reads" "$(mib "$RSS_BEFORE")"
printf '%-44s %s (%s)\n' "rowlock peak RSS (VmHWM)" "$(mib "$PEAK")" "$RESET"
printf '%-44s %s\n' "rowlock RSS after the reads" "$(mib "$RSS_AFTER")"
printf '%-44s %s\n' "peak above the baseline, per client" \
    "$(mib $(((PEAK - RSS_BEFORE) / CLIENTS))) ($(awk -v p="$PEAK" -v b="$RSS_BEFORE" -v c="$CLIENTS" -v u="$BUDGET" 'BEGIN { printf "%.2f", (p - b) * 1024 / c / u }') x the budget)"
printf '%-44s %.1f s\n' "time of the reads" "$(awk -v a="$START" -v b="$END" 'BEGIN { print b - a }')"
