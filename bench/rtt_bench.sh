#!/bin/sh
# RTT on the twin board (QEMU, shared-RAM path): up-channel throughput and loss, odp vs the twin's plain C
# reader `rttcat` (what a user without odp would script); XMODEM-1K over RTT to the twin's flasher, odp vs
# lrzsz `sx -k` bridged with `rttcat pipe`. Goals: >= 1 MB/s with 0 lost; >= 250 KB/s with 0 NAKs.
#   sh bench/rtt_bench.sh [MiB]
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
ODP=${ODP:-build/odp}
mib=${1:-8}
W=build/rtt-bench
mkdir -p "$W"
S=""
trap '[ -n "$S" ] && tests/twin/stop.sh "$S" >/dev/null 2>&1' EXIT
cmake -S tests/twin -B "$W/fw" -DTWIN_MODEL_PATH="$top/tests/fixtures/pte/mnist_ethos_u55.pte" \
  -DTWIN_ETDUMP_PATH="$top/tests/fixtures/etdump/docs_tutorial.etdp" -DTWIN_STREAM_BYTES=$((mib * 1048576)) \
  >"$W/cmake.log" 2>&1 && make -C "$W/fw" -j2 >"$W/make.log" 2>&1 && cc -O2 -o "$W/rttcat" tests/twin/rttcat.c ||
  { echo "build failed (see $W)"; exit 1; }
model=$top/tests/fixtures/pte/mnist_ethos_u55.pte
now() { date +%s.%N; }
launch() { tests/twin/stop.sh "$W/s" >/dev/null 2>&1; S=$W/s; tests/twin/launch.sh "$1" "$S" >/dev/null || exit 1; }

cat >"$W/up.lua" <<'EOS'
local probe, rtt, sys = require("odp.probe"), require("odp.rtt"), require("odp.sys")
local S = arg[1]
local function st(f) local h = io.open(S .. "/" .. f); local v = h:read("l"); h:close(); return v end
local p = assert(probe.open{ backend = "qemu", shm = st("shm"), qmp = "127.0.0.1:" .. st("qmp_port") })
local r = assert(rtt.attach(p, { ranges = { { 0x60000000, 0x10000 } } }))
local ch = r:channel(0)
assert(ch:expect("stream: %d+ bytes\n", { timeout = 10 }))
local alpha, seq, bad, bytes = "abcdefghijklmnopqrstuv", 0, 0, 0
local t0 = sys.now()
for l in ch:lines({ timeout = 60 }) do
  if l == "odp-twin done" then break end
  bytes = bytes + #l + 1
  local n, s = l:match("^(%x+) (%a+)$")
  local k = seq % 22
  if not n or tonumber(n, 16) ~= seq or s ~= alpha:sub(k + 1) .. alpha:sub(1, k) then bad = bad + 1 end
  seq = seq + 1
end
local dt = sys.now() - t0
print(string.format("%.3f %d %d %d", dt, bytes, bad, r:stats().full_seen))
EOS
cat >"$W/xm.lua" <<'EOS'
local probe, rtt, xmodem, sys = require("odp.probe"), require("odp.rtt"), require("odp.xmodem"), require("odp.sys")
local S = arg[1]
local function st(f) local h = io.open(S .. "/" .. f); local v = h:read("l"); h:close(); return v end
local p = assert(probe.open{ backend = "qemu", shm = st("shm"), qmp = "127.0.0.1:" .. st("qmp_port") })
local ch = assert(rtt.attach(p, { ranges = { { 0x60000000, 0x10000 } } })):channel(0)
assert(ch:expect("Starting xmodemReceive...\n", { timeout = 10, plain = true }))
local t0 = sys.now()
local res = assert(xmodem.send(ch, arg[2], { mode = "1k" }))
local dt = sys.now() - t0
assert(ch:expect("Success, %d+ bytes received", { timeout = 10 }))
print(string.format("%.3f %d %d", dt, res.bytes, res.retries))
EOS

launch "$W/fw/twin_stream.elf"
set -- $("$ODP" run "$W/up.lua" "$S")
odt=$1 obytes=$2 obad=$3 ofull=$4
launch "$W/fw/twin_stream.elf"
"$W/rttcat" -s "$S" up -u "stream: " -t 10 >/dev/null
t0=$(now); "$W/rttcat" -s "$S" up -u "odp-twin done" -t 60 >"$W/rttcat.out"; t1=$(now)
cbytes=$(wc -c <"$W/rttcat.out")
awk -v o="$odt" -v ob="$obytes" -v bad="$obad" -v full="$ofull" -v a="$t0" -v b="$t1" -v cb="$cbytes" 'BEGIN {
  c = b - a
  printf "rtt up 0:   odp %.2f MB/s (%d bytes, %d lines lost/damaged, %d full polls)   rttcat %.2f MB/s   ratio %.2fx (goal >= 1 MB/s, 0 lost)\n",
    ob / o / 1e6, ob, bad, full, cb / c / 1e6, (ob / o) / (cb / c) }'

launch "$W/fw/twin_flasher.elf"
set -- $("$ODP" run "$W/xm.lua" "$S" "$model")
xdt=$1 xbytes=$2 xretries=$3
launch "$W/fw/twin_flasher.elf"
"$W/rttcat" -s "$S" up -u "Starting xmodemReceive..." -t 10 >/dev/null
t0=$(now)
socat EXEC:"sx -X -k $model",pipes EXEC:"$W/rttcat -s $S pipe -t 1",pipes 2>/dev/null
t1=$(now)
awk -v o="$xdt" -v ob="$xbytes" -v r="$xretries" -v a="$t0" -v b="$t1" 'BEGIN {
  c = b - a
  printf "xmodem-1K over RTT (%d bytes):  odp %.0f KB/s (%d retries)   sx -k + rttcat pipe %.0f KB/s (incl. its 1 s idle exit)   ratio %.2fx (goal >= 250 KB/s, 0 NAKs)\n",
    ob, ob / o / 1024, r, ob / c / 1024, c / o }'
