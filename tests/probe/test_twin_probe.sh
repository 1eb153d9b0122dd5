#!/bin/sh
# odp.probe (qemu, gdb, jlink backends), odp.rtt and XMODEM over RTT against the twin board in QEMU
# (tests/twin: firmware built here with arm-none-eabi-gcc, QEMU started and stopped by PID through
# launch.sh/stop.sh), plus the RTT telnet client against a socat stand-in for J-Link's port 19021.
set -u
ODP=${ODP:-build/odp}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
W=${ODP_BUILD_DIR:-$root/build}/probe-twin
mkdir -p "$W"
states=""
spids=""
cleanup() {
  for s in $states; do "$root/tests/twin/stop.sh" "$s" >/dev/null 2>&1; done
  for p in $spids; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! { cmake -S "$root/tests/twin" -B "$W/fw" -DTWIN_MODE=runner \
        -DTWIN_MODEL_PATH="$root/tests/fixtures/pte/mnist_ethos_u55.pte" \
        -DTWIN_ETDUMP_PATH="$root/tests/fixtures/etdump/docs_tutorial.etdp" -DTWIN_INFERENCES=5 \
        -DTWIN_STREAM_BYTES=4194304 >"$W/cmake.log" 2>&1 &&
       make -C "$W/fw" -j2 >"$W/make.log" 2>&1 &&
       cc -std=c11 -O2 -shared -fPIC -fvisibility=hidden -o "$W/libjlinkarm.so" "$root/tests/twin/jlinkarm_twin.c"; }; then
  echo "not ok 1 - twin firmware and libjlinkarm.so build"; tail -20 "$W/make.log" "$W/cmake.log" | sed 's/^/#   /'; echo 1..1; exit 1
fi

launch() { # launch IMAGE NAME -> state dir in $S
  S=$W/state-$2
  "$root/tests/twin/stop.sh" "$S" >/dev/null 2>&1
  "$root/tests/twin/launch.sh" "$1" "$S" >"$W/launch-$2.log" 2>&1 || { cat "$W/launch-$2.log"; return 1; }
  states="$states $S"
}

# a J-Link telnet stand-in: banner, then it records the config string and answers "hello"
cat >"$W/telnet_server.sh" <<EOS
printf 'SEGGER J-Link V7.94e - Real time terminal output\r\n'
head -c 35 >"$W/telnet.cfg"
echo hello
EOS
cat >"$W/gui_server.sh" <<'EOS'
printf 'J-Link GUI server V7.94\r\n'
sleep 2
EOS
port=$(shuf -i 20000-60999 -n 1)
socat TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr EXEC:"sh $W/telnet_server.sh" 2>/dev/null & spids="$spids $!"
gport=$(shuf -i 20000-60999 -n 1)
socat TCP-LISTEN:$gport,bind=127.0.0.1,reuseaddr EXEC:"sh $W/gui_server.sh" 2>/dev/null & spids="$spids $!"

launch "$W/fw/twin_runner.elf" runner || exit 1
RUNNER=$S
launch "$W/fw/twin_flasher.elf" flasher || exit 1
FLASHER=$S
launch "$W/fw/twin_stream.elf" stream || exit 1
STREAM=$S

. "$root/tests/lib/tap.sh"
tap_run env ODP_TWIN_STATE="$RUNNER" RUNNER="$RUNNER" FLASHER="$FLASHER" STREAM="$STREAM" FW="$W/fw" \
  JLINK_LIB="$W/libjlinkarm.so" TELNET_PORT="$port" GUI_PORT="$gport" TELNET_CFG="$W/telnet.cfg" \
  MODEL="$root/tests/fixtures/pte/mnist_ethos_u55.pte" "$ODP" run "$here/twin_probe.lua"
tap_done
