#!/usr/bin/env bash
# tests/bench/http.sh: GET /healthz throughput of rowlock against bench_hello, a bare
# libmicrohttpd server with the same daemon options, both with $THREADS threads, under wrk.
#
#   ROWLOCK_DATABASE_URL=postgresql://... tests/bench/http.sh
#
# Environment: ROWLOCK_DATABASE_URL (required: rowlock will not start without its database),
# THREADS (server threads, default 2), DURATION (seconds per wrk run, default 10), ROUNDS (runs of
# each server, alternating, default 3), ROWLOCK_LOG_LEVEL (default info, so access logs are
# written, to a file), KEEP_LOGS=1 (keep that file and the wrk outputs; they are removed at exit
# otherwise), BUILD_DIR (default build).
# Runs baseline, rowlock, baseline, rowlock... ($ROUNDS rounds) and reports every round (with the
# ratio of the round's two runs), the best run of each and the ratio against the target.
# Benchmarks report, they do not assert: the exit status is 0 whatever the ratio, non-zero only
# when something could not be built, started or measured.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
readonly ROOT
# shellcheck source=lib.sh
. "$ROOT/tests/bench/lib.sh"
readonly BUILD="${BUILD_DIR:-$ROOT/build}"
readonly THREADS="${THREADS:-2}"
readonly DURATION="${DURATION:-10}"
readonly ROUNDS="${ROUNDS:-3}"
readonly LOG_LEVEL="${ROWLOCK_LOG_LEVEL:-info}"
readonly KEEP_LOGS="${KEEP_LOGS:-0}"
readonly TARGET=0.80
readonly WRK_THREADS=2 WRK_CONNECTIONS=64 WARMUP_S=2
readonly URL_PATH=/healthz

log() { printf '==> %s\n' "$*" >&2 || true; }
die() {
    printf 'http.sh: error: %s\n' "$*" >&2
    exit 1
}

[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer, not '$THREADS'"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds, not '$DURATION'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, not '$ROUNDS'"

if [ -z "${ROWLOCK_DATABASE_URL:-}" ]; then
    cat >&2 <<'EOF'
http.sh: error: ROWLOCK_DATABASE_URL is not set.
rowlock needs its PostgreSQL database to start (it applies or checks its schema first), even to
answer /healthz. Set ROWLOCK_DATABASE_URL to a libpq URL of a database rowlock may use, e.g.
  ROWLOCK_DATABASE_URL='postgresql:///rowlock?host=/path/to/sock&user=rowlock' tests/bench/http.sh
`deploy/local.sh run` starts a private cluster (.rowlock/pg) and prints its ROWLOCK_DATABASE_URL;
while it runs, that URL works from another shell.
EOF
    exit 1
fi

# ---------------------------------------------------------------------------------------------
# Tools and build

if ! command -v wrk >/dev/null 2>&1; then
    log "wrk is not installed: installing the Debian package wrk"
    if [ "$(id -u)" -eq 0 ]; then
        { apt-get update -q && apt-get install -y -q wrk; } >&2 || die "cannot install wrk"
    elif command -v sudo >/dev/null 2>&1; then
        { sudo apt-get update -q && sudo apt-get install -y -q wrk; } >&2 ||
            die "cannot install wrk"
    else
        die "wrk is missing; install it (apt-get install wrk) and run again"
    fi
fi

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    log "configuring $BUILD"
    cmake -S "$ROOT" -B "$BUILD" >&2 || die "cmake configure failed"
fi
log "building (cmake --build $BUILD)"
cmake --build "$BUILD" --target rowlock bench_hello >&2 || die "build failed"
readonly ROWLOCK_BIN="$BUILD/rowlock" HELLO_BIN="$BUILD/tests/bench/bench_hello"
[ -x "$ROWLOCK_BIN" ] || die "no $ROWLOCK_BIN after the build"
[ -x "$HELLO_BIN" ] || die "no $HELLO_BIN after the build"

# ---------------------------------------------------------------------------------------------
# Servers

WORK="$(mktemp -d "${TMPDIR:-/tmp}/rowlock-bench.XXXXXX")"
readonly WORK
readonly ROWLOCK_LOG="$WORK/rowlock.log" HELLO_LOG="$WORK/bench_hello.log"
ROWLOCK_PID="" HELLO_PID=""

cleanup() {
    stop_server "$ROWLOCK_PID"
    stop_server "$HELLO_PID"
    ROWLOCK_PID="" HELLO_PID=""
}
# shellcheck disable=SC2317 # invoked by the EXIT trap
on_exit() {
    cleanup
    # At level info the log grows by some 30 MB a second of load: not kept unless asked for.
    [ "$KEEP_LOGS" = 1 ] || rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# True once GET $URL_PATH on 127.0.0.1:$1 answers 200 (a subshell: a refused connection must
# not end the script).
answers() (
    status=""
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$URL_PATH" >&3
    IFS=' ' read -r -t 2 _ status _ <&3 || true
    [ "$status" = 200 ]
) 2>/dev/null

wait_answers() {
    local pid=$1 port=$2 i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || return 1
        answers "$port" && return 0
        sleep 0.1
    done
    return 1
}

fail_server() {
    local name=$1 file=$2
    printf 'http.sh: error: %s did not start or does not answer %s; the end of %s:\n' \
        "$name" "$URL_PATH" "$file" >&2
    tail -n 5 "$file" >&2 || true
    exit 1
}

log "starting bench_hello ($THREADS threads)"
"$HELLO_BIN" 0 "$THREADS" 2>"$HELLO_LOG" &
HELLO_PID=$!
HELLO_PORT=$(wait_port "$HELLO_PID") || fail_server bench_hello "$HELLO_LOG"
wait_answers "$HELLO_PID" "$HELLO_PORT" || fail_server bench_hello "$HELLO_LOG"

log "starting rowlock ($THREADS threads, log level $LOG_LEVEL, stderr to $ROWLOCK_LOG)"
# An unreachable database ends rowlock (and the run) after 10 s rather than its default 60 s.
ROWLOCK_LISTEN_ADDRESS=127.0.0.1 ROWLOCK_PORT=0 ROWLOCK_THREADS="$THREADS" \
    ROWLOCK_LOG_LEVEL="$LOG_LEVEL" ROWLOCK_DB_STARTUP_WAIT_S="${ROWLOCK_DB_STARTUP_WAIT_S:-10}" \
    "$ROWLOCK_BIN" 2>"$ROWLOCK_LOG" &
ROWLOCK_PID=$!
ROWLOCK_PORT=$(wait_port "$ROWLOCK_PID") || fail_server rowlock "$ROWLOCK_LOG"
wait_answers "$ROWLOCK_PID" "$ROWLOCK_PORT" || fail_server rowlock "$ROWLOCK_LOG"

# ---------------------------------------------------------------------------------------------
# Measurements

both_alive() {
    kill -0 "$HELLO_PID" 2>/dev/null || fail_server bench_hello "$HELLO_LOG"
    kill -0 "$ROWLOCK_PID" 2>/dev/null || fail_server rowlock "$ROWLOCK_LOG"
}

# Runs wrk against server $2 (pid $3, port $4) for $5 seconds; prints "<requests/s> <p99 ms>
# <server CPU microseconds per request>". $1 names the run.
measure() {
    local name=$1 server=$2 pid=$3 port=$4 secs=$5 out rps p99 requests t0 t1 errors
    t0=$(cpu_ticks "$pid") || {
        both_alive
        die "cannot read the CPU time of $server"
    }
    out=$(wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"${secs}s" --latency \
        "http://127.0.0.1:$port$URL_PATH" 2>&1) || {
        printf '%s\n' "$out" >&2
        die "wrk failed against $name"
    }
    t1=$(cpu_ticks "$pid") || {
        both_alive
        die "cannot read the CPU time of $server"
    }
    printf '%s\n' "$out" >"$WORK/wrk-$name.txt"
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
    requests=$(awk '$2 == "requests" && $3 == "in" { print $1 }' <<<"$out")
    if [ -z "$rps" ] || [ -z "$p99" ] || [ -z "$requests" ] || [ "$requests" -eq 0 ]; then
        printf '%s\n' "$out" >&2
        die "cannot read requests/s, p99 and requests from the wrk output of $name"
    fi
    errors=$(grep -E '^ *(Non-2xx|Socket errors)' <<<"$out" || true)
    [ -z "$errors" ] || log "$name: wrk reports $(tr -s ' \n' ' ' <<<"$errors")"
    both_alive
    printf '%s %s %s\n' "$rps" "$(to_ms "$p99")" \
        "$(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$requests" \
            'BEGIN { printf "%.2f", t / hz / n * 1e6 }')"
}

CLK_TCK=$(getconf CLK_TCK)
readonly CLK_TCK
declare -A PID PORT
PID[baseline]=$HELLO_PID PORT[baseline]=$HELLO_PORT
PID[rowlock]=$ROWLOCK_PID PORT[rowlock]=$ROWLOCK_PORT

log "warming up (${WARMUP_S}s each)"
for server in baseline rowlock; do
    measure "warmup-$server" "$server" "${PID[$server]}" "${PORT[$server]}" "$WARMUP_S" \
        >/dev/null || exit 1
done

declare -A RPS P99 CPU
for ((run = 1; run <= ROUNDS; run++)); do
    for server in baseline rowlock; do
        log "run $run: $server, wrk -t$WRK_THREADS -c$WRK_CONNECTIONS -d${DURATION}s --latency"
        figures=$(measure "$server-$run" "$server" "${PID[$server]}" "${PORT[$server]}" \
            "$DURATION") || exit 1
        read -r "RPS[$server.$run]" "P99[$server.$run]" "CPU[$server.$run]" <<<"$figures"
        log "run $run: $server: ${RPS[$server.$run]} requests/s, p99 ${P99[$server.$run]} ms," \
            "${CPU[$server.$run]} us of server CPU a request"
    done
done

cleanup
LOG_BYTES=$(wc -c <"$ROWLOCK_LOG")
LOG_LINES=$(wc -l <"$ROWLOCK_LOG")
LOG_ACCESS=$(grep -c '"msg":"request"' "$ROWLOCK_LOG" || true)
LOG_WARN=$(grep -cE '"level":"(warn|error)"' "$ROWLOCK_LOG" || true)

# The best run of a server (highest requests/s): its requests/s, p99 and CPU per request.
best() {
    local r b=1
    for ((r = 2; r <= ROUNDS; r++)); do
        awk -v a="${RPS[$1.$r]}" -v b="${RPS[$1.$b]}" 'BEGIN { exit !(a + 0 > b + 0) }' && b=$r
    done
    printf '%s %s %s\n' "${RPS[$1.$b]}" "${P99[$1.$b]}" "${CPU[$1.$b]}"
}
read -r BASE_RPS BASE_P99 BASE_CPU < <(best baseline)
read -r ROW_RPS ROW_P99 ROW_CPU < <(best rowlock)

echo
printf 'GET %s, wrk -t%s -c%s -d%ss, %s server threads, %s cores, rowlock log level %s\n' \
    "$URL_PATH" "$WRK_THREADS" "$WRK_CONNECTIONS" "$DURATION" "$THREADS" "$(nproc)" "$LOG_LEVEL"
echo "every round (baseline, then rowlock, each for ${DURATION}s); CPU ratio: baseline CPU us/req /"
echo "rowlock's, the requests a CPU-second of rowlock serves against bench_hello's:"
printf '%-6s %14s %14s %8s %14s %14s %10s\n' round "baseline req/s" "rowlock req/s" ratio \
    "baseline us/r" "rowlock us/r" "CPU ratio"
ROUND_CPU=""
for ((run = 1; run <= ROUNDS; run++)); do
    awk -v r="$run" -v b="${RPS[baseline.$run]}" -v w="${RPS[rowlock.$run]}" \
        -v bc="${CPU[baseline.$run]}" -v wc="${CPU[rowlock.$run]}" 'BEGIN {
        printf "%-6s %14.0f %14.0f %8.3f %14.2f %14.2f %10.3f\n", r, b, w, (b > 0 ? w / b : 0),
            bc, wc, (wc > 0 ? bc / wc : 0) }'
    ROUND_CPU+="${CPU[baseline.$run]} ${CPU[rowlock.$run]}"$'\n'
done
printf '%s' "$ROUND_CPU" | awk '
    function median(a, n, i, j, t) {
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
            }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $2 > 0 { n++; ratio[n] = $1 / $2; extra[n] = $2 - $1 }
    END {
        printf "median CPU ratio %.3f: rowlock spends %.2f us of CPU a request more than" \
            " bench_hello (median)\n", median(ratio, n), median(extra, n) }'
echo
awk -v br="$BASE_RPS" -v bp="$BASE_P99" -v bc="$BASE_CPU" -v rr="$ROW_RPS" -v rp="$ROW_P99" \
    -v rc="$ROW_CPU" -v t="$TARGET" 'BEGIN {
    f = "%-22s %12s %8s %13s\n"
    printf f, "server", "requests/s", "p99 ms", "CPU us/req"
    f = "%-22s %12.0f %8.2f %13.2f\n"
    printf f, "baseline (bench_hello)", br, bp, bc
    printf f, "rowlock", rr, rp, rc
    ratio = br > 0 ? rr / br : 0
    printf "ratio rowlock/baseline %12.3f   target >= %.2f: %s\n", ratio, t,
        (ratio >= t ? "PASS" : "BELOW") }'
echo "best of $ROUNDS runs each (highest requests/s, with that run's p99 and CPU). CPU us/req: the"
echo "server's user+system CPU time over the run / requests served (wrk shares the same cores)"
echo "rowlock's stderr (JSON log at level $LOG_LEVEL; access-log lines at info) went to a file:"
echo "  $ROWLOCK_LOG: $LOG_LINES lines, $LOG_BYTES bytes, $LOG_ACCESS access-log lines"
if [ "$LOG_WARN" -gt 0 ]; then
    echo "  $LOG_WARN warn/error lines, the first ones:"
    grep -E '"level":"(warn|error)"' "$ROWLOCK_LOG" | head -n 5 | sed 's/^/    /'
fi
if [ "$KEEP_LOGS" = 1 ]; then
    echo "  kept, with the wrk outputs, in $WORK (remove it with: rm -r $WORK)"
else
    echo "  removed at exit with $WORK (KEEP_LOGS=1 keeps them)"
fi
exit 0
