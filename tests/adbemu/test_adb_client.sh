#!/bin/bash
# Validates the adb device emulator against Debian's `adb` (Google's client, 29.0.6):
# if Google's own client works against it, odp's client is tested against a faithful peer.
# Usage: tests/adbemu/test_adb_client.sh [path/to/adbemu]   (prints TAP, exits non-zero on failure)
# Every check here is of the test rig (the emulator), not of odp: each is marked "# rig" (tests/run.sh).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${ODP_BUILD_DIR:-$here/../../build}/tests
if [ $# -eq 0 ]; then
    make -s -C "$here" OUT="$out" >/dev/null || { echo "not ok - building adbemu"; exit 1; }
fi
EMU=${1:-$out/adbemu}
[ -x "$EMU" ] || { echo "not ok - adbemu not built at $EMU (make -C tests/adbemu)"; exit 1; }
command -v adb >/dev/null || { echo "not ok - Debian's adb is missing (vendor/packages.txt [test])"; exit 1; }

work=$(mktemp -d /tmp/adbemu-test.XXXXXX)
export ANDROID_ADB_SERVER_PORT=$(( 20000 + RANDOM % 20000 ))
export HOME=$work/home-main
mkdir -p "$HOME"
emu_pid=
fails=0
n=0

ok() { n=$((n+1)); echo "ok $n - $* # rig"; }
nok() { n=$((n+1)); fails=$((fails+1)); echo "not ok $n - $* # rig"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else nok "$what"; fi; }

stop_emu() {
    if [ -n "$emu_pid" ]; then kill "$emu_pid" 2>/dev/null; wait "$emu_pid" 2>/dev/null; emu_pid=; fi
}
cleanup() {
    adb kill-server >/dev/null 2>&1
    stop_emu
    rm -rf "$work"
}
trap cleanup EXIT

# start_emu NAME ARGS...: sets $port, $sbx, $log; serial is 127.0.0.1:$port
start_emu() {
    local name=$1; shift
    stop_emu
    sbx=$work/$name; log=$work/$name.log
    mkdir -p "$sbx"
    rm -f "$work/port"
    "$EMU" --root "$sbx" --port 0 --port-file "$work/port" "$@" >/dev/null 2>"$log" &
    emu_pid=$!
    for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
    port=$(cat "$work/port" 2>/dev/null)
    S=127.0.0.1:$port
}

a() { timeout 30 adb -s "$S" "$@"; }
aq() { a "$@" >/dev/null 2>&1; }

connect() { timeout 20 adb connect "$S" >/dev/null 2>&1; }

state_is() {  # state_is WANT [tries]
    local want=$1 tries=${2:-40} st
    for _ in $(seq "$tries"); do
        st=$(timeout 5 adb devices 2>/dev/null | awk -v s="$S" '$1==s {print $2}')
        [ "$st" = "$want" ] && return 0
        sleep 0.1
    done
    echo "# state of $S: '$st', wanted '$want'"
    return 1
}

no_violations() { ! grep -q violation "$log" || { grep violation "$log" | sed 's/^/# /'; false; }; }

head -c 3000000 /dev/urandom >"$work/3mb"
printf 'small\n' >"$work/small"
chmod 0755 "$work/small"

# --- default device: no auth, all features ---
start_emu plain --model X300_Pro_Emu
check "emulator listens on a port it printed" test -n "$port"
connect
check "adb connect -> device" state_is device
check "banner model shows in adb devices -l" bash -c "timeout 5 adb devices -l | grep -q 'model:X300_Pro_Emu'"
check "push 3 MB" aq push "$work/3mb" /data/local/tmp/odp/3mb
check "pushed bytes identical" cmp -s "$work/3mb" "$sbx/data/local/tmp/odp/3mb"
a push "$work/small" /data/local/tmp/small >/dev/null 2>&1
check "push applies the file mode (0755)" test "$(stat -c %a "$sbx/data/local/tmp/small")" = 755
check "pull 3 MB" aq pull /data/local/tmp/odp/3mb "$work/3mb.back"
check "pulled bytes identical" cmp -s "$work/3mb" "$work/3mb.back"
a shell 'exit 3' </dev/null; rc=$?
check "shell exit code 3 (shell_v2)" test "$rc" = 3
a shell 'echo to-out; echo to-err >&2; exit 0' </dev/null >"$work/o" 2>"$work/e"; rc=$?
check "shell exit code 0" test "$rc" = 0
check "stdout separated" test "$(cat "$work/o")" = to-out
check "stderr separated" test "$(cat "$work/e")" = to-err
out=$(echo hello-stdin | a shell cat)
check "shell stdin reaches the command" test "$out" = hello-stdin
out=$(a shell 'cd /data/local/tmp && sha256sum odp/3mb' </dev/null | awk '{print $1}')
check "device paths work in shell (sandbox chroot)" test "$out" = "$(sha256sum "$work/3mb" | awk '{print $1}')"
out=$(a exec-out 'printf raw; echo err >&2')
check "exec: gives raw stdout only" test "$out" = raw
out=$(a shell ls /data/local/tmp/odp </dev/null)
check "shell ls sees the pushed file" test "$out" = 3mb
a shell 'yes | head -c 5000000' </dev/null | cmp -s - <(yes | head -c 5000000)
check "5 MB of shell stdout intact" test "${PIPESTATUS[0]}" = 0
a pull /data/local/tmp/missing "$work/x" >/dev/null 2>&1
check "pull of a missing file fails" test $? != 0
cp "$here/system/bin/logcat" "$here/system/bin/log" "$sbx/system/bin/"
out=$(a shell 'logcat -c && log -t Other noise && echo "Method loaded." | log -t ExecuTorch && logcat -d -s ExecuTorch:I' </dev/null)
check "logcat stand-in: -c, log, -d -s TAG:I" bash -c "grep -q ' I ExecuTorch: Method loaded.\$' <<<'$out' && ! grep -q noise <<<'$out'"
check "no protocol violations by adb" no_violations
adb disconnect "$S" >/dev/null 2>&1

# --- no shell_v2: plain shell:, no exit status ---
start_emu noshellv2 --no-shell-v2
connect; state_is device >/dev/null
out=$(a shell 'echo o; echo e >&2; exit 3' 2>/dev/null </dev/null); rc=$?
check "without shell_v2 the exit status is lost (adb returns 0)" test "$rc" = 0
check "without shell_v2 stderr is merged into stdout" test "$(printf '%s' "$out" | tr -d '\r' | tr '\n' ' ')" = "o e"
adb disconnect "$S" >/dev/null 2>&1

# --- maxdata 4096 ---
start_emu maxdata --maxdata 4096
connect; state_is device >/dev/null
check "push 3 MB with maxdata 4096" aq push "$work/3mb" /data/local/tmp/m
check "maxdata 4096: bytes identical" cmp -s "$work/3mb" "$sbx/data/local/tmp/m"
check "maxdata 4096: pull identical" bash -c "timeout 30 adb -s $S pull /data/local/tmp/m $work/m.back >/dev/null && cmp -s $work/3mb $work/m.back"
check "maxdata 4096: adb never exceeded it" no_violations
adb disconnect "$S" >/dev/null 2>&1

# --- checksumming 0x01000000 peer ---
start_emu checksum --version 0x01000000
connect
check "0x01000000 device: connects" state_is device
check "0x01000000 device: push (checksums verified)" aq push "$work/3mb" /data/local/tmp/c
a shell 'exit 5' </dev/null; rc=$?
check "0x01000000 device: shell exit code" test "$rc" = 5
check "0x01000000 device: adb's checksums all correct" no_violations
adb disconnect "$S" >/dev/null 2>&1

# --- split and coalesced WRTEs ---
start_emu split --split 3
connect; state_is device >/dev/null
a shell 'echo o1; echo e1 >&2; exit 4' </dev/null >"$work/o" 2>"$work/e"; rc=$?
check "split WRTEs (3 bytes): exit code" test "$rc" = 4
check "split WRTEs: stdout and stderr" test "$(cat "$work/o")/$(cat "$work/e")" = o1/e1
check "split WRTEs: pull" bash -c "printf abcdefghij > $sbx/data/local/tmp/s && timeout 30 adb -s $S pull /data/local/tmp/s $work/s >/dev/null && test \$(cat $work/s) = abcdefghij"
adb disconnect "$S" >/dev/null 2>&1
start_emu coalesce --coalesce
connect; state_is device >/dev/null
a shell 'echo o1; echo e1 >&2; echo o2; exit 6' </dev/null >"$work/o" 2>"$work/e"; rc=$?
check "coalesced WRTEs: exit code" test "$rc" = 6
check "coalesced WRTEs: streams" test "$(cat "$work/o" | tr '\n' ' ')/$(cat "$work/e")" = "o1 o2 /e1"
adb disconnect "$S" >/dev/null 2>&1

# --- FAIL on SEND ---
start_emu failsend --fail-send
connect; state_is device >/dev/null
msg=$(a push "$work/small" /data/local/tmp/x 2>&1); rc=$?
check "FAIL on SEND: adb push fails" test "$rc" != 0
check "FAIL on SEND: adb shows the device's message" bash -c "grep -q 'SEND refused' <<<'$msg'"
adb disconnect "$S" >/dev/null 2>&1

# --- CLSE on OPEN ---
start_emu clse --clse-open
connect; state_is device >/dev/null
a shell true </dev/null >/dev/null 2>&1; rc=$?
check "CLSE on OPEN: adb shell fails" test "$rc" != 0
adb disconnect "$S" >/dev/null 2>&1

# --- disconnect mid-push ---
start_emu drop --drop-push 1000000
connect; state_is device >/dev/null
a push "$work/3mb" /data/local/tmp/d >/dev/null 2>&1; rc=$?
check "disconnect mid-push: adb push fails" test "$rc" != 0
check "disconnect mid-push: file is partial" test "$(stat -c %s "$sbx/data/local/tmp/d" 2>/dev/null || echo 0)" -lt 3000000
adb disconnect "$S" >/dev/null 2>&1
connect
check "disconnect mid-push: reconnect and push again" aq push "$work/3mb" /data/local/tmp/d
check "disconnect mid-push: second push complete" cmp -s "$work/3mb" "$sbx/data/local/tmp/d"
adb disconnect "$S" >/dev/null 2>&1

# --- AUTH: verify a signature with a known key ---
adb kill-server >/dev/null 2>&1
export HOME=$work/home-auth
mkdir -p "$HOME/.android"
adb keygen "$HOME/.android/adbkey" >/dev/null 2>&1
start_emu auth-verify --auth "verify:$HOME/.android/adbkey.pub"
connect
check "AUTH verify: adb's signature accepted -> device" state_is device
check "AUTH verify: shell works" test "$(a shell echo hi </dev/null)" = hi
adb disconnect "$S" >/dev/null 2>&1

# --- AUTH: a new key, the user taps Allow (creates the tap file) once the prompt is up ---
adb kill-server >/dev/null 2>&1
export HOME=$work/home-new
mkdir -p "$HOME"
start_emu auth-accept --auth "accept-on:$work/tap"
connect
check "AUTH accept: unauthorized while the prompt is up" state_is unauthorized 20
touch "$work/tap"
check "AUTH accept: device after Allow" state_is device 60
check "AUTH accept: adb created ~/.android/adbkey" test -s "$HOME/.android/adbkey"
check "AUTH accept: shell works" test "$(a shell echo hi </dev/null)" = hi
adb disconnect "$S" >/dev/null 2>&1

# --- AUTH: never accepted ---
start_emu auth-never --auth never -v
connect
check "AUTH never: unauthorized" state_is unauthorized 20
# the event: adb offered its public key and the device left it unanswered
for _ in $(seq 100); do grep -q 'public key offered; never accepted' "$log" && break; sleep 0.1; done
check "AUTH never: adb offered its key" grep -q 'public key offered; never accepted' "$log"
check "AUTH never: still unauthorized after the key was offered" state_is unauthorized 5
a shell true </dev/null >/dev/null 2>&1; rc=$?
check "AUTH never: shell refused" test "$rc" != 0
adb disconnect "$S" >/dev/null 2>&1

# the server's port is free once kill-server returns (adb get-state cannot tell: it starts a new server)
server_listens() { ss -Hltn "sport = :$ANDROID_ADB_SERVER_PORT" | grep -q .; }
check "adb server listens on its port" server_listens
adb kill-server >/dev/null 2>&1
for _ in $(seq 50); do server_listens || break; sleep 0.1; done
check "adb server stopped: nothing listens on its port" bash -c "! ss -Hltn 'sport = :$ANDROID_ADB_SERVER_PORT' | grep -q ."
stop_emu
echo "1..$n"
[ "$fails" = 0 ]
