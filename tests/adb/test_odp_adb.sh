#!/bin/bash
# odp's adb client (odp.adb over TCP) against the adb device emulator in every mode.
# The emulator is itself validated by Debian's adb in tests/adbemu/test_adb_client.sh.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
. "$(dirname "$0")/env.sh"
EMU=$out/adbemu
# no adb server (nothing listens on port 1): odp devices and --adb auto take the direct path whatever runs here
export ANDROID_ADB_SERVER_PORT=1
unset ADB_SERVER_SOCKET ANDROID_SERIAL

work=$(mktemp -d /tmp/odp-adb-test.XXXXXX)
emu_pid=
only=${ADB_TEST_ONLY:-}   # run one mode: ADB_TEST_ONLY=plain (or "flow")
stop_emu() { if [ -n "$emu_pid" ]; then kill "$emu_pid" 2>/dev/null; wait "$emu_pid" 2>/dev/null; emu_pid=; fi; }
trap 'stop_emu; rm -rf "$work"' EXIT

# run MODE [emulator args...]: a fresh sandbox, HOME and emulator, then client.lua
run() {
    local mode=$1; shift
    [ -z "$only" ] || [ "$only" = "$mode" ] || return 0
    stop_emu
    local sbx=$work/$mode log=$work/$mode.log
    mkdir -p "$sbx" "$work/home-$mode"
    rm -f "$work/port"
    "$EMU" --root "$sbx" --port 0 --port-file "$work/port" "$@" >/dev/null 2>"$log" &
    emu_pid=$!
    for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
    tap_run env HOME="${RUN_HOME:-$work/home-$mode}" ADBEMU_PORT="$(cat "$work/port")" ADBEMU_ROOT="$sbx" ADBEMU_LOG="$log" \
        ADB_MODE="$mode" "$ODP" run "$here/${SCRIPT:-client}.lua"
    # the emulator's own log: a check of the rig's protocol checker as much as of odp
    if grep -q violation "$log"; then
        tap_not_ok "$mode: no protocol violations by odp (checked by the emulator) # rig" "$(grep violation "$log")"
    else
        tap_ok "$mode: no protocol violations by odp (checked by the emulator) # rig"
    fi
    stop_emu
}

run plain
run noshellv2 --no-shell-v2
run maxdata --maxdata 4096
run checksum --version 0x01000000
run split --split 3
run coalesce --coalesce
run failsend --fail-send
run clse --clse-open
run drop --drop-push 1000000
run droptarget --drop-push 1000000
# the resident helper: services counted from the emulator's own log (-v: every OPEN)
SCRIPT=count run count -v
# a pipelined sweep against one point at a time, behind the delaying relay (issue 38)
SCRIPT=pipeline run pipeline

if [ -z "$only" ] || [ "$only" = flow ]; then
# The Android flow with the test runner program on the device (logcat stand-in installed).
make -s -C "$top" BUILD="${ODP_BUILD_DIR:-$top/build}" "${ODP_BUILD_DIR:-$top/build}/tests/fake_runner" "${ODP_BUILD_DIR:-$top/build}/tests/rss_touch" >/dev/null 2>&1
stop_emu
mkdir -p "$work/flow/system/bin"
cp "$top/tests/adbemu/system/bin/logcat" "$top/tests/adbemu/system/bin/log" "$work/flow/system/bin/"
rm -f "$work/port"
"$EMU" --root "$work/flow" --port 0 --port-file "$work/port" >/dev/null 2>"$work/flow.log" &
emu_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
tap_run env HOME="$work/home-flow" ADBEMU_PORT="$(cat "$work/port")" ADBEMU_ROOT="$work/flow" ADBEMU_BIN="$EMU" \
    "$ODP" run "$here/flow.lua"
stop_emu
fi

# AUTH: a key made by Google's adb (same file format), a vendor key, a new key, a refusal.
mkdir -p "$work/home-auth-verify/.android" "$work/vendor"
adb keygen "$work/home-auth-verify/.android/adbkey" >/dev/null 2>&1
run auth-verify --auth "verify:$work/home-auth-verify/.android/adbkey.pub"
adb keygen "$work/vendor/ci.adb_key" >/dev/null 2>&1
ADB_VENDOR_KEYS=$work/vendor run auth-vendor --auth "verify:$work/vendor/ci.adb_key.pub"
run auth-accept --auth "accept-on:$work/home-auth-accept/tap"
run auth-never --auth never
SCRIPT=devices run devices
SCRIPT=devices run devices-unauthorized --auth never
tap_done
