#!/bin/sh
# A large ETDump over RTT on the twin (issue 42): the whole Ethos-U flow (build, flash, run) with the twin's
# runner streaming an ETDump of 8, 24 and 64 MiB (random bytes, TWIN_ETDUMP_PATH) as the one base64 line the
# firmware prints, at the default --timeout (60 s). Per size: the run step's time (reset, RTT attach, capture,
# decode), the received etdump.bin compared with the file, and a plain `base64 -d` of the same base64 text as
# the reference; the run step's seconds per MiB stay flat when the capture is linear (it was quadratic: 24 MiB
# took 48-71 s). Goal: 64 MiB within the default timeout, s/MiB at 64 MiB within 1.5x of 8 MiB's.
#   sh bench/etdump_capture_bench.sh [MiB ...]      (default: 8 24 64)
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
ODP=${ODP:-$top/build/odp}
W=$top/build/etdump-capture-bench
sizes=${*:-8 24 64}
mkdir -p "$W"
model=$top/tests/fixtures/pte/mnist_ethos_u55.pte
now() { date +%s.%N; }
printf '%-6s %-10s %-10s %-10s %-12s %-8s %s\n' MiB run_s s/MiB b64d_s run/b64d ok etdump
for mib in $sizes; do
  e=$W/etdump-$mib.bin
  [ -s "$e" ] || head -c $((mib * 1048576)) /dev/urandom >"$e"
  dev=$W/twin_e$mib.lua
  sed '0,/^return {/s//local d = {/' devices/twin_m55.lua >"$dev"
  printf 'd.name = "twin_e%s"\nd.build.cmake.TWIN_ETDUMP_PATH = "%s"\nreturn d\n' "$mib" "$e" >>"$dev"
  rm -rf "$W/runs-$mib"
  "$ODP" run scripts/alif_e8.lua --device "$dev" --model "$model" --inferences 5 --build-dir "$W/b-$mib" \
    --runs-dir "$W/runs-$mib" --format json --out "$W/r-$mib.json" -q >/dev/null 2>"$W/err-$mib.log"
  st=$?
  base64 -w0 "$e" >"$W/e-$mib.b64"
  t0=$(now); base64 -d "$W/e-$mib.b64" >/dev/null; t1=$(now)
  "$ODP" run /dev/stdin "$W/r-$mib.json" "$e" "$mib" "$(echo "$t1 - $t0" | bc)" "$st" <<'EOS'
local json, sys = require("odp.core.json"), require("odp.sys")
local rec = json.decode(sys.read_file(arg[1]) or "null") or {}
local run_s
for _, s in ipairs(rec.steps or {}) do if s.name == "run" then run_s = s.ms / 1000 end end
local got = rec.artifacts and require("odp.results.result").artifact(rec, "etdump", rec.artifacts.run_dir)
local same = got and sys.read_file(got) == sys.read_file(arg[2])
local mib, b64 = tonumber(arg[3]), tonumber(arg[4])
print(("%-6d %-10.2f %-10.3f %-10.3f %-12.1f %-8s %s"):format(mib, run_s or -1, (run_s or -1) / mib, b64,
  (run_s or -1) / b64, tostring(arg[5] == "0" and rec.ok), same and "byte-identical" or "DIFFERS"))
EOS
done
