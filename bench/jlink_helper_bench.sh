#!/bin/sh
# The J-Link helper's round trip (docs/jlink-helper.md): one small probe read through the helper process
# (odp --jlink-helper, the test libjlinkarm.so reading a shared file: the DLL's own cost is a memcpy) against the
# same read in-process through the qemu backend (a memcpy of the same file). The twin's QMP is a socat
# stand-in: only the DLL's Connect asks it anything. A real J-Link's USB transaction costs ~0.1-1 ms on top of any of these.
#   sh bench/jlink_helper_bench.sh [READS]
set -u
cd "$(dirname "$0")/.." || exit 1
ODP=${ODP:-build/odp}
n=${1:-20000}
W=build/jlink-helper-bench
mkdir -p "$W/state"
cc -std=c11 -O2 -shared -fPIC -fvisibility=hidden -o "$W/libjlinkarm.so" tests/twin/jlinkarm_twin.c || exit 1
head -c 1048576 /dev/zero >"$W/shm"
printf 'SEGGER RTT' | dd of="$W/shm" conv=notrunc 2>/dev/null
port=$(shuf -i 20000-60999 -n 1)
cat >"$W/qmp.sh" <<'EOS'
printf '{"QMP": {}}\n'
while read -r l; do printf '{"return": {}}\n'; done
EOS
socat TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork EXEC:"sh $W/qmp.sh" 2>/dev/null &
spid=$!
trap 'kill $spid 2>/dev/null' EXIT
echo "$W/shm" >"$W/state/shm"
echo "$port" >"$W/state/qmp_port"
sleep 0.3
cat >"$W/bench.lua" <<'EOS'
local probe, sys = require("odp.probe"), require("odp.sys")
local W, n = arg[1], tonumber(arg[2])
local function time(what, p)
  assert(p:read(0x60000000, 10) == "SEGGER RTT")
  local t0 = sys.now()
  for _ = 1, n do p:read(0x60000000, 4) end
  local us = (sys.now() - t0) / n * 1e6
  print(("%-44s %8.2f us per read"):format(what, us))
  io.stdout:flush()
  return us
end
local q = assert(probe.open { backend = "qemu", shm = W .. "/shm" })
local inproc = time("qemu backend, in-process (memcpy)", q)
q:close()
local j = assert(probe.open { backend = "jlink", lib = W .. "/libjlinkarm.so", env = { ODP_TWIN_STATE = W .. "/state" } })
local helper = time("jlink backend through its helper process", j)
j:close()
print(("helper round trip: %.1f us (%.0fx the in-process read); a real J-Link USB transaction: 100-1000 us")
  :format(helper, helper / inproc))
EOS
echo "# $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $n reads of 4 bytes each"
"$ODP" run "$W/bench.lua" "$W" "$n"
