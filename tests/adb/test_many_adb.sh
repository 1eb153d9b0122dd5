#!/bin/bash
# Many adb boards at once (issue 18): three adb device emulators behind Google's adb server (Debian's adb, on a
# private port with its own HOME, holding them over TCP after `adb connect`) and a fourth reached directly over
# TCP (--adb tcp:HOST:PORT), all in one lab file. The checks are in many.lua; conns.lua bounds the server's
# connections (adb_connections 1 and 2), conncount.lua counts them from the server's side meanwhile.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
command -v adb >/dev/null || { echo "not ok 1 - Debian's adb is missing (vendor/packages.txt [test])"; echo 1..1; exit 1; }
. "$(dirname "$0")/env.sh"

work=$(mktemp -d /tmp/odp-manyadb.XXXXXX)
export HOME=$work/home ADBTEST_WORK=$work
mkdir -p "$HOME"
export ANDROID_ADB_SERVER_PORT=$(( 20000 + (RANDOM % 2000) * 8 + 3 ))
unset ADB_SERVER_SOCKET ANDROID_ADB_SERVER_ADDRESS ANDROID_SERIAL
cleanup() {
    adb kill-server >/dev/null 2>&1
    for f in "$work"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

for i in 1 2 3 4; do
    mkdir -p "$work/dev$i/system/bin"
    cp "$top/tests/adbemu/system/bin/logcat" "$top/tests/adbemu/system/bin/log" "$work/dev$i/system/bin/"
    "$out/adbemu" --root "$work/dev$i" --port 0 --port-file "$work/port$i" --model Emu_$i >/dev/null 2>"$work/dev$i.log" &
    echo $! >"$work/dev$i.pid"
    disown
done
for i in 1 2 3 4; do
    for _ in $(seq 100); do [ -s "$work/port$i" ] && break; sleep 0.05; done
done
adb start-server >/dev/null 2>&1 || { echo "not ok 1 - adb start-server on port $ANDROID_ADB_SERVER_PORT"; echo 1..1; exit 1; }
for i in 1 2 3; do timeout 20 adb connect "127.0.0.1:$(cat "$work/port$i")" >/dev/null 2>&1; done
# three server boards with 1, then 2, connections to the server allowed: conncount.lua counts them meanwhile
for limit in 1 2; do
    rm -f "$work/stop" "$work/conns"
    ADBTEST_STOP=$work/stop ADBTEST_CONNS=$work/conns "$ODP" run "$here/conncount.lua" &
    tap_run env ADBTEST_LIMIT=$limit ADBTEST_STOP="$work/stop" ADBTEST_CONNS="$work/conns" "$ODP" run "$here/conns.lua"
    touch "$work/stop"
    wait
done
tap_run "$ODP" run "$here/many.lua"
if grep -q violation "$work"/dev*.log; then
    tap_not_ok "the emulators saw no protocol violations # rig"; grep violation "$work"/dev*.log | sed 's/^/#   /'
else
    tap_ok "the emulators saw no protocol violations # rig"
fi
tap_done
