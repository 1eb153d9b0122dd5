# Sourced by the adb benches: a scratch dir ($work, removed on exit), a private HOME and adb server port, and the
# adb device emulator (tests/adbemu, built into $out) serving $work/sbx; $port is where it listens.
work=$(mktemp -d /tmp/odp-adb-bench.XXXXXX)
export HOME=$work/home ANDROID_ADB_SERVER_PORT=$(( 20000 + RANDOM % 20000 ))
unset ADB_SERVER_SOCKET ANDROID_ADB_SERVER_ADDRESS ANDROID_SERIAL
mkdir -p "$HOME" "$work/sbx"
emu_pid=
cleanup() { adb kill-server >/dev/null 2>&1; [ -n "$emu_pid" ] && kill "$emu_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$out/adbemu" --root "$work/sbx" --port 0 --port-file "$work/port" >/dev/null 2>"$work/emu.log" &
emu_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")
