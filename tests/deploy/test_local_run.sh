#!/usr/bin/env bash
# deploy/local.sh run, with what it calls faked: a copy of the script in a scratch checkout whose
# build/rowlock records its environment and arguments, and cmake and dpkg-query stand-ins on PATH
# (every package installed; cmake records what it is asked to build). Checks that run builds only
# the service and the CLI, and that it listens on 127.0.0.1 unless ROWLOCK_LISTEN_ADDRESS or
# --listen-address says otherwise.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
TMP=$(mktemp -d /tmp/rowlock-local-run.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/checkout/deploy" "$TMP/checkout/build/cli" "$TMP/bin"
cp "$SRC/deploy/local.sh" "$TMP/checkout/deploy/local.sh"
cat >"$TMP/checkout/build/rowlock" <<'FAKE'
#!/bin/sh
printf 'listen=%s args=%s\n' "${ROWLOCK_LISTEN_ADDRESS-unset}" "$*" >"$ROWLOCK_FAKE_LOG/rowlock"
FAKE
printf '#!/bin/sh\n' >"$TMP/checkout/build/cli/rowlock-cli"
printf '#!/bin/sh\n[ "$1" != --build ] || printf "%%s\\n" "$*" >>"$ROWLOCK_FAKE_LOG/cmake"\n' \
    >"$TMP/bin/cmake"
printf '#!/bin/sh\nprintf "install ok installed"\n' >"$TMP/bin/dpkg-query"
chmod +x "$TMP/checkout/build/rowlock" "$TMP/checkout/build/cli/rowlock-cli" "$TMP/bin/"*

failed=0
# check NAME WANT [VAR=value...] -- [rowlock flags...]: runs local.sh run; WANT must be the line
# the fake rowlock wrote.
check() {
    local name=$1 want=$2 envs=() got
    shift 2
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    rm -f "$TMP/rowlock" "$TMP/cmake"
    env -u ROWLOCK_LISTEN_ADDRESS PATH="$TMP/bin:$PATH" ROWLOCK_FAKE_LOG="$TMP" \
        ROWLOCK_DATABASE_URL=postgresql:///unused "${envs[@]}" \
        bash "$TMP/checkout/deploy/local.sh" run "$@" 2>"$TMP/stderr" ||
        { cat "$TMP/stderr"; echo "FAIL $name: local.sh run exited non-zero"; failed=1; return; }
    got=$(cat "$TMP/rowlock" 2>/dev/null || echo "(rowlock did not run)")
    if [ "$got" != "$want" ]; then
        cat "$TMP/stderr"
        echo "FAIL $name: rowlock ran with '$got', expected '$want'"
        failed=1
        return
    fi
    if [ "$(cat "$TMP/cmake")" != "--build $TMP/checkout/build -j2 --target rowlock rowlock-cli" ]; then
        echo "FAIL $name: run built '$(cat "$TMP/cmake")', expected only rowlock and rowlock-cli"
        failed=1
        return
    fi
    echo "ok $name: $got"
}

check "loopback by default" "listen=127.0.0.1 args=--port 0" -- --port 0
check "the variable chooses" "listen=0.0.0.0 args=" ROWLOCK_LISTEN_ADDRESS=0.0.0.0 --
check "the flag chooses" "listen=unset args=--listen-address 0.0.0.0" -- --listen-address 0.0.0.0
check "the flag= chooses" "listen=unset args=--listen-address=::" -- --listen-address=::
exit "$failed"
