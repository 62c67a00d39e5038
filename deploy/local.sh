#!/usr/bin/env bash
# deploy/local.sh: build rowlock and run it, or its tests, against a private PostgreSQL cluster.
#
#   deploy/local.sh run [rowlock flags...]   build build/rowlock and build/cli/rowlock-cli, start (or
#                                            reuse) .rowlock/pg, run build/rowlock on 127.0.0.1
#   deploy/local.sh test                     build build/, build-asan/, build-tsan/; run their suites
#                                            against a throwaway cluster, removed on exit; fuzz
#                                            each target of build-fuzz/ for a few seconds
#   deploy/local.sh fuzz [SECONDS]           build build-fuzz/ and fuzz each target SECONDS (300)
#   deploy/local.sh pgctl DIR start|stop|status   control the cluster in DIR (the tests use this
#                                            through $ROWLOCK_TEST_PGCTL)
#   deploy/local.sh pgpair DIR init|kill-primary|promote|stop|status   a primary and synchronous
#                                            standby in DIR (the failover test, $ROWLOCK_TEST_PGPAIR)
#
# Installs missing Debian packages when run as root (or through sudo). PostgreSQL refuses to run as
# root, so as root the cluster belongs to the `postgres` system user and lives outside the checkout
# (which that user may not be able to enter); .rowlock/pg is then a symlink to it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
readonly ROOT
readonly SELF="$ROOT/deploy/local.sh"
readonly STATE="$ROOT/.rowlock"
readonly REDOCLY_VERSION=1.34.20
readonly PG_OS_USER=postgres

# Logging never fails: after a Ctrl-C, stderr may be a pipe whose reader (tee, less) is gone.
log() { printf '==> %s\n' "$*" >&2 || true; }
warn() { printf 'local.sh: warning: %s\n' "$*" >&2 || true; }
die() {
    printf 'local.sh: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    cat >&2 <<'EOF'
usage: deploy/local.sh run [rowlock flags...]
       deploy/local.sh test [--quick]
       deploy/local.sh fuzz [SECONDS]
       deploy/local.sh pgctl DIR start|stop|status
       deploy/local.sh pgpair DIR init|kill-primary|promote|stop|status

run    build build/rowlock and build/cli/rowlock-cli (only those: `test` builds the rest) and run
       build/rowlock in the foreground on 127.0.0.1 (loopback only: ROWLOCK_LISTEN_ADDRESS or
       --listen-address chooses another address, 0.0.0.0 every interface; set
       ROWLOCK_TOKENS_FILE first), port $ROWLOCK_PORT (default 8080), with no tokens unless
       ROWLOCK_TOKENS_FILE names a file. Without ROWLOCK_DATABASE_URL it starts a private
       PostgreSQL cluster (.rowlock/pg), whose data persists across runs; Ctrl-C or SIGTERM
       stops the service, then the cluster.
test   build all of build/ (the service, the CLI, the tests and benches), build-asan/
       (ROWLOCK_SANITIZE=ON) and build-tsan/ (ROWLOCK_TSAN=ON), run
       the three ctest suites against a throwaway cluster, then remove it; build build-fuzz/
       (clang, ROWLOCK_FUZZ=ON) and fuzz each of its targets for about a minute in all; builds
       the releases named by db/schema/released/6/RELEASE (the release before migrations)
       into build-prev/ and db/schema/released/17/RELEASE into build-release-17/ for the
       upgrade tests (ROWLOCK_TEST_PREV_BINARY, ROWLOCK_TEST_LAST_RELEASE_BINARY). Exits
       non-zero if any suite failed or a fuzz target crashed or broke one of its properties.
       --quick: the inner loop, about two minutes once built: build/ and the releases only, and
       the release suite (every unit and integration test); no sanitizer builds, fuzzing or
       deploy checks. CI runs everything.
fuzz   build build-fuzz/ and fuzz each target for SECONDS (default 300) under ASan+UBSan; the
       corpus grows in .rowlock/fuzz/<target>/ (seeds: tests/fuzz/corpus/<target>/), a failing
       input is saved in .rowlock/fuzz/artifacts/. Exits non-zero on the first failure found.
pgctl  start or stop (fast, waiting) the cluster in DIR as the user that owns it.
pgpair a primary and its synchronous standby in DIR (DIR/primary, DIR/standby; Unix sockets
       only) for the failover test: init makes both anew (removing what DIR held) and waits
       until the standby is synchronous; kill-primary kills the primary's postmaster and every
       process it started (SIGKILL, by pid); promote promotes the standby (pg_ctl promote,
       waiting); stop stops both (immediate); status prints "ROLE running|stopped KIND SOCKET"
       per node. The tests use it through $ROWLOCK_TEST_PGPAIR.
EOF
    exit 2
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# ---------------------------------------------------------------------------------------------
# Packages and build

# Installs those of the named Debian packages that are not installed; apt-get update only then.
ensure_packages() {
    local p status missing=()
    for p in "$@"; do
        status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
        [[ $status == *"ok installed" ]] || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "packages: all present"
        return 0
    fi
    local sudo=()
    if ! is_root; then
        command -v sudo >/dev/null 2>&1 ||
            die "missing Debian packages: ${missing[*]} (run as root, or install them first)"
        sudo=(sudo)
    fi
    log "packages: installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Every package a command needs, on a minimal Debian 12: checked in a chroot made with
# `debootstrap --variant=minbase bookworm` (its sources.list given bookworm-updates and
# bookworm-security, as an installed system has), git added, a clone in /root (0700: the postgres
# user cannot enter it), then `CI=true bash .ci/run` as root there, which passes every suite.
# tzdata: the system's time-zone database (/usr/share/zoneinfo), which the service reads at run
# time for schedules in a named zone and the unit tests of db/tzfile.c and db/cron.c need (they
# fail without it): named here, not left to postgresql's dependencies or the base system.
# libgnutls28-dev: HTTPS on the listener (service/tls.c) and --check-health https:// link GnuTLS
# itself, not only through libmicrohttpd.
readonly BASE_PACKAGES=(gcc g++ make cmake pkg-config libmicrohttpd-dev libgnutls28-dev libpq-dev
    libjansson-dev libcmocka-dev libcurl4-openssl-dev libssl-dev postgresql postgresql-contrib curl
    clang-format tzdata)
# The fuzz targets of tests/fuzz need clang, libFuzzer and clang's runtimes (libclang_rt.fuzzer
# and the ASan and UBSan runtimes they link, in libclang-rt-14-dev).
readonly FUZZ_PACKAGES=(clang libfuzzer-14-dev libclang-rt-14-dev)
# What the tests drive besides rowlock: a load balancer in front of several processes (haproxy),
# the dashboard's browser tests (chromium, headless), the failover test's standby (pg_basebackup
# comes with postgresql) and its kills (ps, in procps), the previous release's tree for the
# upgrade test (git archive), the throwaway CA and certificates of the TLS tests (the openssl
# command, tests/integration/harness/harness_tls.c) and the scan of the HTTPS listener
# (testssl, tests/integration/process/test_tls_scan.c).
readonly TEST_PACKAGES=(haproxy chromium procps git openssl testssl.sh)

# build DIR [cmake -D options...] [-- TARGET...]: configures DIR, then builds the targets named,
# or all of them.
build() {
    local dir=$1 opts=() targets=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        opts+=("$1")
        shift
    done
    [ $# -eq 0 ] || { shift && targets=("$@"); }
    log "build: configuring $dir"
    cmake -S "$ROOT" -B "$ROOT/$dir" "${opts[@]}"
    if [ ${#targets[@]} -eq 0 ]; then
        log "build: compiling $dir"
        cmake --build "$ROOT/$dir" -j2
    else
        log "build: compiling ${targets[*]} in $dir"
        cmake --build "$ROOT/$dir" -j2 --target "${targets[@]}"
    fi
}

prepare_state_dir() {
    mkdir -p "$STATE/logs"
    [ -f "$STATE/.gitignore" ] || printf '*\n' >"$STATE/.gitignore"
}

# A released build, for the upgrade tests (tests/integration/schema/test_upgrade_from_released.c
# and test_queue_conformance_previous_release): its commit is named in
# db/schema/released/<version>/RELEASE; its tree comes from this clone's history (git archive,
# no network, no worktree), and only its rowlock binary is built, once per commit, into DIR.
# $1: the release's schema version, $2: DIR under the checkout. Prints the binary's path.
build_release() {
    local version=$1 release=$ROOT/db/schema/released/$1/RELEASE commit dir=$ROOT/$2
    [ -f "$release" ] || die "db/schema/released/$version/RELEASE is missing"
    commit=$(sed -n 's/^commit=//p' "$release")
    git -C "$ROOT" cat-file -e "$commit^{commit}" 2>/dev/null ||
        die "release $version's commit $commit is not in this clone's history (fetch it)"
    if [ "$(cat "$dir/COMMIT" 2>/dev/null || true)" != "$commit" ] || [ ! -x "$dir/build/rowlock" ]; then
        log "build: release $version ($commit) into $2/"
        rm -rf "$dir"
        mkdir -p "$dir/src"
        git -C "$ROOT" archive "$commit" | tar -x -C "$dir/src"
        cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
        cmake --build "$dir/build" -j2 --target rowlock >&2
        printf '%s\n' "$commit" >"$dir/COMMIT"
    fi
    printf '%s\n' "$dir/build/rowlock"
}

build_fuzz() {
    build build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DROWLOCK_FUZZ=ON
}

# fuzz_all SECONDS: fuzzes each target of build-fuzz/ for SECONDS, its corpus in .rowlock/fuzz/
# on top of the committed seeds; returns non-zero when any target failed (its log and the
# failing input are named).
fuzz_all() {
    local seconds=$1 t name rc failed=0 log_file dict
    mkdir -p "$STATE/fuzz/artifacts"
    for t in "$ROOT"/build-fuzz/tests/fuzz/fuzz_*; do
        if [ ! -f "$t" ] || [ ! -x "$t" ]; then continue; fi
        name=$(basename "$t")
        mkdir -p "$STATE/fuzz/$name"
        log_file=$STATE/logs/fuzz-$name.log
        rc=0
        # a target's words (tests/fuzz/<target>.dict), when it has some
        dict=()
        [ ! -f "$ROOT/tests/fuzz/$name.dict" ] || dict=(-dict="$ROOT/tests/fuzz/$name.dict")
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            "$t" "${dict[@]}" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -timeout=10 \
            -artifact_prefix="$STATE/fuzz/artifacts/" -print_final_stats=1 \
            "$STATE/fuzz/$name" "$ROOT/tests/fuzz/corpus/$name" >"$log_file" 2>&1 || rc=$?
        if [ "$rc" -eq 0 ]; then
            log "fuzz: $name ran ${seconds}s clean ($(grep -m1 -o 'number_of_executed_units: [0-9]*' \
                "$log_file" | grep -o '[0-9]*$' || echo '?') inputs)"
        else
            tail -n 40 "$log_file" >&2 || true
            log "fuzz: $name FAILED (status $rc); log $log_file, input in .rowlock/fuzz/artifacts/"
            failed=1
        fi
    done
    [ -n "${name:-}" ] || {
        warn "no fuzz targets in build-fuzz/tests/fuzz"
        return 1
    }
    return "$failed"
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL cluster. A cluster directory CDIR holds data/, sock/, postgres.log and (for test) the
# pgctl script. cluster_use sets the globals below; the other functions act on them.

CDIR="" DATA="" SOCK="" PGLOG="" PGBIN=""

# Runs "$@" as the cluster's OS user (postgres when we are root), from / so that a working
# directory that user cannot enter does no harm.
as_pg() {
    if is_root; then
        (cd / && runuser -u "$PG_OS_USER" -- "$@")
    else
        (cd / && "$@")
    fi
}

# Picks the server binaries: the cluster's own major version when it exists, else the highest.
find_pgbin() {
    local v=""
    if [ -f "$DATA/PG_VERSION" ]; then
        v=$(cat "$DATA/PG_VERSION")
        [ -x "/usr/lib/postgresql/$v/bin/pg_ctl" ] ||
            die "cluster $DATA is PostgreSQL $v but /usr/lib/postgresql/$v/bin is missing"
    else
        v=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null |
            sort -V | tail -n 1 || true)
    fi
    if [ -z "$v" ] || [ ! -x "/usr/lib/postgresql/$v/bin/initdb" ]; then
        die "no PostgreSQL server under /usr/lib/postgresql (install the postgresql package)"
    fi
    PGBIN=/usr/lib/postgresql/$v/bin
}

cluster_use() {
    CDIR=$1
    DATA=$CDIR/data
    SOCK=$CDIR/sock
    PGLOG=$CDIR/postgres.log
    find_pgbin
}

# Percent-encodes a string for a URI query value.
urlencode() {
    local LC_ALL=C s=$1 out="" c i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
        [A-Za-z0-9/._~-]) out+=$c ;;
        *) out+=$(printf '%%%02X' "'$c") ;;
        esac
    done
    printf '%s' "$out"
}

# libpq URI of database $1 as superuser rowlock over the cluster's socket.
pg_url() { printf 'postgresql:///%s?host=%s&user=rowlock' "$1" "$(urlencode "$SOCK")"; }

# Makes CDIR (owned by the cluster's user, private) and, as root, checks that user exists.
cluster_mkdir() {
    if is_root; then
        id -u "$PG_OS_USER" >/dev/null 2>&1 ||
            die "system user $PG_OS_USER is missing (it comes with the postgresql package)"
        install -d -m 0700 -o "$PG_OS_USER" -g "$(id -gn "$PG_OS_USER")" "$CDIR"
    else
        install -d -m 0700 "$CDIR"
    fi
}

# Creates the cluster unless it exists, and (re)writes its settings. $1: run | test
cluster_init() {
    local kind=$1 sock_file="$SOCK/.s.PGSQL.5432"
    [ ${#sock_file} -le 100 ] ||
        die "socket path too long for a unix socket (${#sock_file} > 100): $sock_file"
    cluster_mkdir
    if [ ! -f "$DATA/PG_VERSION" ]; then
        local locale=C
        grep -qiE '^c\.utf-?8$' <<<"$(locale -a 2>/dev/null || true)" && locale=C.UTF-8
        log "postgres: initdb $DATA ($PGBIN)"
        as_pg rm -rf "$DATA"
        as_pg "$PGBIN/initdb" -D "$DATA" -A trust -U rowlock --encoding=UTF8 --locale="$locale" \
            >"$CDIR/initdb.log.tmp" 2>&1 || {
            cat "$CDIR/initdb.log.tmp" >&2
            die "initdb failed"
        }
        rm -f "$CDIR/initdb.log.tmp"
        printf "\ninclude_if_exists = 'rowlock.conf'\n" | as_pg tee -a "$DATA/postgresql.conf" >/dev/null
    fi
    as_pg mkdir -p -m 0700 "$SOCK"
    local sockdir=${SOCK//\'/\'\'}
    {
        printf '# Written by deploy/local.sh on every start; edits are overwritten.\n'
        printf "listen_addresses = ''\n"
        printf "unix_socket_directories = '\"%s\"'\n" "$sockdir"
        printf 'unix_socket_permissions = 0700\n'
        printf 'port = 5432\n'
        printf 'max_connections = 300\n'
        printf 'shared_buffers = 256MB\n'
        if [ "$kind" = test ]; then
            printf 'fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n'
        fi
    } | as_pg tee "$DATA/rowlock.conf" >/dev/null
}

# True when postmaster.pid names a live postmaster of this data directory. A stale pid file (its
# process is gone, or the pid now belongs to something else) is removed with the socket lock.
cluster_running() {
    local pidfile=$DATA/postmaster.pid pid
    [ -f "$pidfile" ] || return 1
    pid=$(head -n 1 "$pidfile" 2>/dev/null || true)
    if as_pg "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1 && [[ $pid =~ ^[0-9]+$ ]] &&
        [ "$(readlink "/proc/$pid/cwd" 2>/dev/null || true)" = "$(readlink -f "$DATA")" ]; then
        return 0
    fi
    log "postgres: removing stale $pidfile (pid ${pid:-?} is not this cluster's postmaster)"
    rm -f "$pidfile" "$SOCK/.s.PGSQL.5432" "$SOCK/.s.PGSQL.5432.lock"
    return 1
}

cluster_start() {
    if cluster_running; then
        log "postgres: already running ($DATA)"
        return 0
    fi
    log "postgres: starting ($DATA, log $PGLOG)"
    as_pg touch "$PGLOG"
    if ! as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$PGLOG" -w -t 120 start >/dev/null; then
        tail -n 30 "$PGLOG" >&2 || true
        die "PostgreSQL did not start; see $PGLOG"
    fi
}

cluster_stop() {
    [ -n "$DATA" ] && [ -d "$DATA" ] || return 0
    if cluster_running; then
        log "postgres: stopping ($DATA)"
        as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 120 stop >/dev/null ||
            warn "pg_ctl stop failed; see $PGLOG"
    fi
}

cluster_create_db() {
    local admin
    admin=$(pg_url postgres)
    if [ -z "$("$PGBIN/psql" "$admin" -XAtqc "select 1 from pg_database where datname = 'rowlock'")" ]; then
        log "postgres: creating database rowlock"
        "$PGBIN/psql" "$admin" -Xqc 'create database rowlock'
    fi
}

# Waits for background child $1 and returns its exit status. A trapped signal cuts a plain
# `wait` short (that is the point: bash defers traps while a foreground command runs), so this
# waits again until the child is really gone.
wait_child() {
    local pid=$1 rc again
    while :; do
        rc=0
        wait "$pid" || rc=$?
        kill -0 "$pid" 2>/dev/null || break
    done
    if [ "$rc" -gt 128 ]; then # maybe the status of an interrupted wait: ask once more
        again=0
        wait "$pid" 2>/dev/null || again=$?
        [ "$again" -eq 127 ] || rc=$again
    fi
    return "$rc"
}

# ---------------------------------------------------------------------------------------------
# run

RUN_CHILD="" RUN_CLUSTER=0 RUN_SIGNALS=0

run_on_signal() {
    trap '' PIPE # see log()
    RUN_SIGNALS=$((RUN_SIGNALS + 1))
    [ -n "$RUN_CHILD" ] || exit 130
    if [ "$RUN_SIGNALS" -eq 1 ]; then
        log "run: stopping rowlock (pid $RUN_CHILD); signal again to kill it"
        kill -TERM "$RUN_CHILD" 2>/dev/null || true
    else
        log "run: killing rowlock (pid $RUN_CHILD)"
        kill -KILL "$RUN_CHILD" 2>/dev/null || true
    fi
}

run_on_exit() {
    local rc=$?
    trap '' PIPE
    trap - INT TERM
    if [ -n "$RUN_CHILD" ] && kill -0 "$RUN_CHILD" 2>/dev/null; then
        kill -TERM "$RUN_CHILD" 2>/dev/null || true
        wait "$RUN_CHILD" 2>/dev/null || true
    fi
    [ "$RUN_CLUSTER" -eq 1 ] && cluster_stop
    exit "$rc"
}

# run_listen_default [rowlock flags...]: a local run listens on loopback only unless
# ROWLOCK_LISTEN_ADDRESS or --listen-address says otherwise (rowlock's own default, 0.0.0.0, is
# the container's).
run_listen_default() {
    local a
    for a in "$@"; do
        case $a in --listen-address | --listen-address=*) return 0 ;; esac
    done
    [ -z "${ROWLOCK_LISTEN_ADDRESS:-}" ] || return 0
    export ROWLOCK_LISTEN_ADDRESS=127.0.0.1
    log "run: listening on 127.0.0.1 only (ROWLOCK_LISTEN_ADDRESS=0.0.0.0: every interface)"
}

cmd_run() {
    ensure_packages "${BASE_PACKAGES[@]}"
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo -- rowlock rowlock-cli
    [ -x "$ROOT/build/rowlock" ] || die "build did not produce build/rowlock"
    [ -x "$ROOT/build/cli/rowlock-cli" ] || die "build did not produce build/cli/rowlock-cli"
    prepare_state_dir
    trap run_on_exit EXIT
    trap run_on_signal INT TERM

    if [ -n "${ROWLOCK_DATABASE_URL:-}" ]; then
        log "run: using ROWLOCK_DATABASE_URL from the environment; no private cluster"
    else
        local dir=$STATE/pg
        if is_root; then
            local key
            key=$(printf '%s' "$ROOT" | sha1sum | cut -c1-12)
            dir=/var/lib/rowlock-local/$key
            install -d -m 0755 /var/lib/rowlock-local
            [ -L "$STATE/pg" ] || [ ! -e "$STATE/pg" ] ||
                die "$STATE/pg exists and is not a symlink (made by a non-root run?); remove it"
            ln -sfn "$dir" "$STATE/pg"
        fi
        cluster_use "$dir"
        cluster_init run
        RUN_CLUSTER=1
        cluster_start
        cluster_create_db
        export ROWLOCK_DATABASE_URL
        ROWLOCK_DATABASE_URL=$(pg_url rowlock)
        log "run: ROWLOCK_DATABASE_URL=$ROWLOCK_DATABASE_URL"
    fi
    export ROWLOCK_PORT="${ROWLOCK_PORT:-8080}"
    run_listen_default "$@"

    log "run: starting build/rowlock on port $ROWLOCK_PORT (Ctrl-C stops it)"
    # Own session: a terminal's Ctrl-C reaches only this script, which sends SIGTERM once.
    setsid -w "$ROOT/build/rowlock" "$@" &
    RUN_CHILD=$!
    local rc=0
    wait_child "$RUN_CHILD" || rc=$?
    RUN_CHILD=""
    log "run: rowlock exited with status $rc"
    exit "$rc"
}

# ---------------------------------------------------------------------------------------------
# test

TEST_DIR="" TEST_CHILD=""

# INT/TERM during a suite: end the whole ctest process group (its tests too), then exit, which
# runs test_on_exit.
test_on_signal() {
    trap '' PIPE # see log()
    if [ -n "$TEST_CHILD" ]; then
        log "test: interrupted; stopping ctest"
        kill -TERM -- "-$TEST_CHILD" 2>/dev/null || true
        wait "$TEST_CHILD" 2>/dev/null || true
    fi
    exit $((128 + $1))
}

test_on_exit() {
    local rc=$?
    trap '' PIPE
    trap - INT TERM
    if [ -n "$TEST_DIR" ]; then
        [ ! -d "$TEST_DIR/pair" ] || pair_stop "$TEST_DIR/pair" || true # a failed test's
        cluster_use "$TEST_DIR"
        cluster_stop || true
        cp "$PGLOG" "$STATE/logs/postgres-test.log" 2>/dev/null || true
        log "test: removing throwaway cluster $TEST_DIR (its log: .rowlock/logs/postgres-test.log)"
        rm -rf "$TEST_DIR"
        rm -f "$STATE/pg-test"
    fi
    exit "$rc"
}

# Writes CDIR/pgctl, the executable the integration tests call to stop and start this cluster.
write_pgctl() {
    local script=$CDIR/pgctl
    {
        printf '#!/usr/bin/env bash\n# Generated by deploy/local.sh: %s stop|start|status\n' "$script"
        printf 'exec %q pgctl %q "$@"\n' "$SELF" "$CDIR"
    } >"$script"
    chmod 0755 "$script"
}

# Writes CDIR/pgpair, the executable the failover test calls to make and break its primary and
# standby (in CDIR/pair; made by the test's `init`, stopped by its `stop`, removed with CDIR).
write_pgpair() {
    local script=$CDIR/pgpair
    {
        printf '#!/usr/bin/env bash\n# Generated by deploy/local.sh: %s ' "$script"
        printf 'init|kill-primary|promote|stop|status\n'
        printf 'exec %q pgpair %q "$@"\n' "$SELF" "$CDIR/pair"
    } >"$script"
    chmod 0755 "$script"
}

install_redocly() {
    local dir=$STATE/node have=""
    local bin=$dir/node_modules/.bin/redocly
    if [ -f "$dir/node_modules/@redocly/cli/package.json" ]; then
        have=$(node -p "require('$dir/node_modules/@redocly/cli/package.json').version" 2>/dev/null || true)
    fi
    if [ "$have" != "$REDOCLY_VERSION" ] || [ ! -x "$bin" ]; then
        log "test: npm install @redocly/cli@$REDOCLY_VERSION into .rowlock/node"
        mkdir -p "$dir"
        if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
            "@redocly/cli@$REDOCLY_VERSION" >&2; then
            warn "npm install @redocly/cli failed; ROWLOCK_TEST_REDOCLY is not set"
            return 0
        fi
    fi
    export ROWLOCK_TEST_REDOCLY=$bin
}

# run_suite DIR [VAR=value...]: runs one ctest suite with those variables; returns its status.
# ctest runs in its own session (so pid = process group) in the background, for test_on_signal.
run_suite() {
    local dir=$1 rc=0
    shift
    log "test: ctest $dir"
    "$ROWLOCK_TEST_PGCTL" start # a failed test may have left PostgreSQL down
    setsid -w env "$@" ctest --test-dir "$ROOT/$dir" --output-on-failure -j2 --timeout 600 \
        --no-tests=error &
    TEST_CHILD=$!
    wait_child "$TEST_CHILD" || rc=$?
    TEST_CHILD=""
    return "$rc"
}

# record NAME STATUS: notes one summary line; sets FAILED on a non-zero status.
SUMMARY=() FAILED=0
record() {
    if [ "$2" -eq 0 ]; then
        SUMMARY+=("suite $1: passed")
    else
        SUMMARY+=("suite $1: FAILED")
        FAILED=1
    fi
}

# The npm packages deploy/check-deploy.mjs validates with (Kubernetes' schemas compiled), in
# .rowlock/node-deploy; prints their node_modules directory. kubernetes-models 5.1.0 declares
# Node.js 22, yet runs check-deploy.mjs on Debian 12's Node.js 18.20 (npm only warns, and at
# --loglevel=error says nothing); so does @redocly/cli 1.34.20, which declares npm 9.5, with
# Debian 12's npm 9.2 (checked on a minimal Debian 12).
readonly DEPLOY_NODE_PACKAGES=(kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0
    yaml@2.9.1)
install_deploy_checkers() {
    local dir=$STATE/node-deploy want have=""
    want=$(printf '%s\n' "${DEPLOY_NODE_PACKAGES[@]}")
    [ -f "$dir/installed" ] && have=$(cat "$dir/installed")
    if [ "$have" != "$want" ] || [ ! -d "$dir/node_modules/kubernetes-models" ]; then
        log "test: npm install ${DEPLOY_NODE_PACKAGES[*]} into .rowlock/node-deploy"
        mkdir -p "$dir"
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
            "${DEPLOY_NODE_PACKAGES[@]}" >&2 || return 1
        printf '%s\n' "$want" >"$dir/installed"
    fi
    printf '%s\n' "$dir/node_modules"
}

# The dashboard's browser tests (tests/browser/): playwright-core drives Debian's chromium
# headless (it downloads no browser), axe-core checks accessibility. Pinned, like the above:
# playwright-core 1.61.1 is the newest that runs on Debian 12's Node.js 18 (1.62 and later refuse
# Node.js below 20), and it drives Debian 12's chromium (150 and 156 seen).
readonly BROWSER_NODE_PACKAGES=(playwright-core@1.61.1 axe-core@4.14.1)
install_browser_checkers() {
    local dir=$STATE/node-browser want have=""
    want=$(printf '%s\n' "${BROWSER_NODE_PACKAGES[@]}")
    [ -f "$dir/installed" ] && have=$(cat "$dir/installed")
    if [ "$have" != "$want" ] || [ ! -d "$dir/node_modules/playwright-core" ]; then
        log "test: npm install ${BROWSER_NODE_PACKAGES[*]} into .rowlock/node-browser"
        mkdir -p "$dir"
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
            "${BROWSER_NODE_PACKAGES[@]}" >&2 || return 1
        printf '%s\n' "$want" >"$dir/installed"
    fi
    printf '%s\n' "$dir/node_modules"
}

# The dashboard in a real browser against build/rowlock (screenshots in .rowlock/logs/ui/).
check_browser() {
    local modules
    log "test: tests/browser/ui.test.mjs (the dashboard in headless chromium)"
    command -v chromium >/dev/null 2>&1 || { warn "chromium not found (Debian package chromium)"; return 1; }
    modules=$(install_browser_checkers) || return 1
    ROWLOCK_BROWSER_NODE_MODULES=$modules ROWLOCK_BINARY=$ROOT/build/rowlock \
        ROWLOCK_TEST_CHROMIUM=$(command -v chromium) node "$ROOT/tests/browser/ui.test.mjs"
}

# Checks the operator files in deploy/: promtool on the rules and their tests, then
# deploy/check-deploy.mjs (runbook for every alert, PrometheusRule in step with the rules, every
# Kubernetes manifest against its schema); `kubectl kustomize` renders too when kubectl exists.
check_deploy() {
    local p=$ROOT/deploy/prometheus modules rendered=()
    log "test: promtool checks of deploy/prometheus"
    "$ROWLOCK_TEST_PROMTOOL" check config "$p/prometheus.yml" >&2 &&
        "$ROWLOCK_TEST_PROMTOOL" check rules "$p/rowlock-rules.yml" >&2 &&
        (cd "$p" && "$ROWLOCK_TEST_PROMTOOL" test rules rowlock-rules.test.yml >&2) || return 1
    log "test: deploy/check-deploy.mjs (alerts, runbooks, Kubernetes manifests)"
    modules=$(install_deploy_checkers) || return 1
    if command -v kubectl >/dev/null 2>&1; then
        local d
        for d in kubernetes kubernetes/monitoring; do
            kubectl kustomize "$ROOT/deploy/$d" >"$STATE/logs/kustomize-${d//\//-}.yaml" || return 1
            rendered+=(--rendered "$STATE/logs/kustomize-${d//\//-}.yaml")
        done
    else
        log "test: kubectl not installed; the manifests are rendered by check-deploy.mjs alone"
    fi
    ROWLOCK_DEPLOY_NODE_MODULES=$modules node "$ROOT/deploy/check-deploy.mjs" "${rendered[@]}"
}

# cmd_test [--quick]
cmd_test() {
    local quick=0
    [ "${1:-}" = --quick ] && quick=1
    local pkgs=("${BASE_PACKAGES[@]}" "${TEST_PACKAGES[@]}")
    command -v promtool >/dev/null 2>&1 || pkgs+=(prometheus)
    command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
    [ "$quick" -eq 1 ] || pkgs+=("${FUZZ_PACKAGES[@]}")
    ensure_packages "${pkgs[@]}"
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    if [ "$quick" -eq 0 ]; then
        build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROWLOCK_SANITIZE=ON
        build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROWLOCK_TSAN=ON
        # compiled, not run: -O3 inlines further and GCC warns of what -O2 does not see
        build build-o3 -DCMAKE_BUILD_TYPE=Release
        build_fuzz
    fi
    # the upgrade tests fail without them (they never skip): the release before migrations, and
    # the newest release, which serves beside this build during a rolling upgrade
    export ROWLOCK_TEST_PREV_BINARY ROWLOCK_TEST_LAST_RELEASE_BINARY
    ROWLOCK_TEST_PREV_BINARY=$(build_release 6 build-prev)
    ROWLOCK_TEST_LAST_RELEASE_BINARY=$(build_release 17 build-release-17)
    prepare_state_dir

    trap test_on_exit EXIT
    trap 'test_on_signal 2' INT
    trap 'test_on_signal 15' TERM
    TEST_DIR=$(mktemp -d /tmp/rowlock-test.XXXXXX)
    ln -sfn "$TEST_DIR" "$STATE/pg-test"
    cluster_use "$TEST_DIR"
    cluster_init test
    cluster_start
    cluster_create_db
    write_pgctl
    write_pgpair

    export ROWLOCK_DATABASE_URL ROWLOCK_TEST_ADMIN_URL ROWLOCK_TEST_PGCTL ROWLOCK_TEST_PROMTOOL
    export ROWLOCK_TEST_PGPAIR=$CDIR/pgpair
    ROWLOCK_DATABASE_URL=$(pg_url rowlock)
    ROWLOCK_TEST_ADMIN_URL=$(pg_url postgres)
    ROWLOCK_TEST_PGCTL=$CDIR/pgctl
    ROWLOCK_TEST_PROMTOOL=$(command -v promtool || true)
    [ -n "$ROWLOCK_TEST_PROMTOOL" ] || die "promtool not found (Debian package prometheus)"
    unset ROWLOCK_TEST_REDOCLY
    if command -v npm >/dev/null 2>&1; then
        install_redocly
    else
        warn "npm not found; ROWLOCK_TEST_REDOCLY is not set"
    fi
    log "test: ROWLOCK_TEST_ADMIN_URL=$ROWLOCK_TEST_ADMIN_URL"
    log "test: ROWLOCK_TEST_PGCTL=$ROWLOCK_TEST_PGCTL"

    local rc
    if [ "$quick" -eq 1 ]; then
        rc=0 && run_suite build || rc=$?
        record "release (build/), quick: no sanitizers, fuzzing or deploy checks" "$rc"
        test_summary
        return
    fi
    rc=0 && check_deploy || rc=$?
    record "deploy (promtool, runbooks, Kubernetes manifests)" "$rc"
    rc=0 && check_browser || rc=$?
    record "browser (tests/browser: the dashboard in headless chromium)" "$rc"
    rc=0 && run_suite build || rc=$?
    record "release (build/)" "$rc"
    rc=0 && run_suite build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 || rc=$?
    record "asan+ubsan (build-asan/)" "$rc"
    # a race found in a test or in a rowlock it started fails that test (exit status 66)
    rc=0 && run_suite build-tsan TSAN_OPTIONS=halt_on_error=0:exitcode=66 || rc=$?
    record "tsan (build-tsan/)" "$rc"
    # about a minute of fuzzing in all (deploy/local.sh fuzz runs longer)
    local targets each
    targets=$(find "$ROOT/build-fuzz/tests/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x | wc -l)
    each=$((60 / (targets > 0 ? targets : 1)))
    [ "$each" -ge 5 ] || each=5
    rc=0 && fuzz_all "$each" || rc=$?
    record "fuzz (build-fuzz/, ASan+UBSan)" "$rc"
    test_summary
}

# Prints the suites' summary lines; exits 1 when one failed.
test_summary() {
    local line
    for line in "${SUMMARY[@]}"; do log "summary: $line"; done
    if [ "$FAILED" -ne 0 ]; then
        log "summary: FAILED"
        exit 1
    fi
    log "summary: all suites passed"
}

# ---------------------------------------------------------------------------------------------
# fuzz [SECONDS]

cmd_fuzz() {
    local seconds=${1:-300}
    [[ $seconds =~ ^[1-9][0-9]*$ ]] || die "fuzz: SECONDS must be a positive integer"
    ensure_packages "${BASE_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}"
    build_fuzz
    prepare_state_dir
    fuzz_all "$seconds" || die "fuzz: a target failed"
    log "fuzz: every target ran ${seconds}s clean"
}

# ---------------------------------------------------------------------------------------------
# pgctl DIR start|stop|status

cmd_pgctl() {
    [ $# -eq 2 ] || usage
    [ -f "$1/data/PG_VERSION" ] || die "no cluster in $1"
    cluster_use "$(cd "$1" && pwd -P)"
    case $2 in
    start) cluster_start ;;
    stop)
        cluster_stop
        ! cluster_running || die "PostgreSQL did not stop"
        ;;
    status)
        if cluster_running; then echo running; else
            echo stopped
            exit 3
        fi
        ;;
    *) usage ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# pgpair DIR init|kill-primary|promote|stop|status
#
# A primary (DIR/primary) and its synchronous standby (DIR/standby) on this machine, for the
# failover test (tests/integration/db/test_failover.c, through $ROWLOCK_TEST_PGPAIR). Unix sockets
# only; the standby streams over the primary's socket (pg_basebackup -R, application_name
# rowlock_standby) and the primary waits for it at every commit (synchronous_standby_names,
# synchronous_commit on). fsync stays off: the test kills PostgreSQL, never the machine.

readonly PAIR_STANDBY_NAME=rowlock_standby

# pair_conf ROLE: appends the pair's settings to the node's rowlock.conf (after cluster_init's,
# so that they win).
pair_conf() {
    {
        printf '# the failover pair (deploy/local.sh pgpair)\n'
        printf 'max_connections = 100\nshared_buffers = 32MB\nsynchronous_commit = on\n'
        printf 'wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\n'
        printf 'wal_sender_timeout = 5s\nwal_receiver_timeout = 5s\nwal_retrieve_retry_interval = 200ms\n'
        if [ "$1" = primary ]; then
            printf "synchronous_standby_names = '%s'\n" "$PAIR_STANDBY_NAME"
        fi
    } | as_pg tee -a "$DATA/rowlock.conf" >/dev/null
}

# The postmaster pid of the node in use when it runs, else nothing.
pair_pid() {
    local pid
    pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
        [ "$(readlink "/proc/$pid/cwd" 2>/dev/null || true)" = "$(readlink -f "$DATA")" ] &&
        printf '%s\n' "$pid"
}

# True while one of the pids runs (a zombie, dead but not yet reaped, does not count).
pids_alive() {
    local p
    for p in "$@"; do
        [[ $(ps -o stat= -p "$p" 2>/dev/null || true) =~ ^[^Z] ]] && return 0
    done
    return 1
}

# Kills the node in use at once: its postmaster, stopped first so that it forks nothing more,
# and every process it started, by pid; then waits until they are gone.
pair_kill() {
    local pid kids i
    pid=$(pair_pid) || return 0
    kill -STOP "$pid" 2>/dev/null || true
    read -r -a kids <<<"$(ps -o pid= --ppid "$pid" | tr '\n' ' ' || true)"
    kill -KILL "$pid" "${kids[@]}" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        pids_alive "$pid" "${kids[@]}" || return 0
        sleep 0.05
    done
    warn "pgpair: processes of $DATA still alive after SIGKILL"
}

# pair_node DIR ROLE: selects node ROLE of the pair in DIR.
pair_node() { cluster_use "$1/$2"; }

pair_stop() {
    local dir=$1 role
    for role in standby primary; do
        pair_node "$dir" "$role"
        [ -f "$DATA/PG_VERSION" ] || continue
        if pair_pid >/dev/null; then
            as_pg "$PGBIN/pg_ctl" -D "$DATA" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
            pair_kill # if pg_ctl could not
        fi
    done
}

pair_init() {
    local dir=$1 psock i state=""
    pair_stop "$dir"
    [ ! -e "$dir" ] || as_pg rm -rf "$dir/primary" "$dir/standby"
    cluster_use "$dir"
    cluster_mkdir
    pair_node "$dir" primary
    cluster_init test
    pair_conf primary
    cluster_start
    psock=$SOCK
    pair_node "$dir" standby
    cluster_mkdir
    log "pgpair: pg_basebackup into $DATA"
    as_pg "$PGBIN/pg_basebackup" -D "$DATA" -R -X stream -c fast \
        -d "host=$psock user=rowlock application_name=$PAIR_STANDBY_NAME" ||
        die "pgpair: pg_basebackup failed"
    cluster_init test
    pair_conf standby
    cluster_start
    for ((i = 0; i < 300; i++)); do # until the primary counts it as its synchronous standby
        state=$("$PGBIN/psql" "host=$psock dbname=postgres user=rowlock" -XAtqc \
            "select sync_state from pg_stat_replication where application_name = '$PAIR_STANDBY_NAME'" \
            2>/dev/null || true)
        [ "$state" = sync ] && break
        sleep 0.1
    done
    [ "$state" = sync ] || die "pgpair: the standby did not become synchronous (state '${state:-none}')"
    log "pgpair: primary $dir/primary and synchronous standby $dir/standby running"
}

# Prints each node's state: ROLE running|stopped primary|standby SOCKETDIR
pair_status() {
    local dir=$1 role kind
    for role in primary standby; do
        pair_node "$dir" "$role"
        if pair_pid >/dev/null; then
            kind=primary
            [ -f "$DATA/standby.signal" ] && kind=standby
            printf '%s running %s %s\n' "$role" "$kind" "$SOCK"
        else
            printf '%s stopped - %s\n' "$role" "$SOCK"
        fi
    done
}

cmd_pgpair() {
    [ $# -eq 2 ] || usage
    local dir
    case $2 in
    init)
        mkdir -p "$(dirname "$1")"
        dir=$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")
        pair_init "$dir"
        return
        ;;
    esac
    [ -d "$1/primary" ] || die "no pair in $1 (pgpair $1 init makes one)"
    dir=$(cd "$1" && pwd -P)
    case $2 in
    kill-primary)
        pair_node "$dir" primary
        pair_kill
        ;;
    promote)
        pair_node "$dir" standby
        as_pg "$PGBIN/pg_ctl" -D "$DATA" -w -t 60 promote >/dev/null || die "pgpair: promote failed"
        ;;
    stop) pair_stop "$dir" ;;
    status) pair_status "$dir" ;;
    *) usage ;;
    esac
}

main() {
    [ $# -ge 1 ] || usage
    local cmd=$1
    shift
    cd "$ROOT"
    case $cmd in
    run) cmd_run "$@" ;;
    test)
        [ $# -eq 0 ] || { [ $# -eq 1 ] && [ "$1" = --quick ]; } || usage
        cmd_test "$@"
        ;;
    fuzz)
        [ $# -le 1 ] || usage
        cmd_fuzz "$@"
        ;;
    pgctl) cmd_pgctl "$@" ;;
    pgpair) cmd_pgpair "$@" ;;
    -h | --help | help) usage ;;
    *)
        printf 'local.sh: unknown subcommand: %s\n' "$cmd" >&2
        usage
        ;;
    esac
}

main "$@"
