#!/bin/bash
# odp through Google's adb server (Debian's adb, the real one) to the adb device emulator: the server runs on a
# private port with its own HOME and holds the emulated device over TCP (`adb connect`), as Android Studio's
# server holds a phone over USB. The checks are in server.lua.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
command -v adb >/dev/null || { echo "not ok - Debian's adb is missing (vendor/packages.txt [test])"; exit 1; }
command -v socat >/dev/null || { echo "not ok - socat is missing (vendor/packages.txt [test])"; exit 1; }
. "$(dirname "$0")/env.sh"
make -s -C "$top" BUILD="${ODP_BUILD_DIR:-$top/build}" "$out/fake_runner" >/dev/null 2>&1

work=$(mktemp -d /tmp/odp-adbserver.XXXXXX)
export HOME=$work/home ADBEMU=$out/adbemu ADBTEST_WORK=$work
mkdir -p "$HOME"
# a free port for the server, and the next ones for the listeners that only pretend (server.lua)
base=$(( 20000 + (RANDOM % 2000) * 8 ))
export ANDROID_ADB_SERVER_PORT=$base
unset ADB_SERVER_SOCKET ANDROID_ADB_SERVER_ADDRESS ANDROID_SERIAL
cleanup() {
    adb kill-server >/dev/null 2>&1
    for f in "$work"/*.pid; do [ -f "$f" ] && kill -- -"$(cat "$f")" 2>/dev/null; done
    for f in "$work"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

sbx=$work/device
mkdir -p "$sbx/system/bin"
cp "$top/tests/adbemu/system/bin/logcat" "$top/tests/adbemu/system/bin/log" "$sbx/system/bin/"
"$ADBEMU" --root "$sbx" --port 0 --port-file "$work/port" --model X300_Pro_Emu >/dev/null 2>"$work/device.log" &
echo $! >"$work/device.pid"
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
adb start-server >/dev/null 2>&1 || { echo "not ok - adb start-server on port $base"; exit 1; }
timeout 20 adb connect "127.0.0.1:$(cat "$work/port")" >/dev/null 2>&1
tap_run env ADBEMU_PORT="$(cat "$work/port")" ADBEMU_ROOT="$sbx" "$ODP" run "$here/server.lua"
if grep -q violation "$work/device.log"; then
    tap_not_ok "the emulator saw no protocol violations # rig"; grep violation "$work/device.log" | sed 's/^/#   /'
else
    tap_ok "the emulator saw no protocol violations # rig"
fi
tap_done
