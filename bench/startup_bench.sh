#!/bin/sh
# Startup: `odp run` of an empty script against `lua5.4` of the same script (what odp embeds), with hyperfine
# (wall time, Debian package) and callgrind (instructions, steadier on a loaded machine). Prints the ratios;
# the goal is odp within 1.3x of lua5.4 (odp links only Lua and libc; libssh2, libusb, libserialport, libedit
# and libcrypto load with the modules that need them).
#   sh bench/startup_bench.sh [RUNS]
set -u
cd "$(dirname "$0")/.." || exit 1
odp=${ODP:-build/odp}
runs=${1:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/empty.lua"
if command -v hyperfine >/dev/null; then
  hyperfine -N --warmup 20 --runs "$runs" --export-csv "$tmp/h.csv" \
    "lua5.4 $tmp/empty.lua" "$odp run $tmp/empty.lua" >/dev/null 2>&1
  # columns: command,mean,stddev,median,user,system,min,max (seconds)
  awk -F, -v runs="$runs" 'NR == 2 { l = $4 } NR == 3 { o = $4 }
    END { printf "wall (hyperfine, median of %d)  lua5.4 %.3f ms   odp %.3f ms   ratio %.2f  (goal <= 1.30)\n",
          runs, l * 1e3, o * 1e3, o / l }' "$tmp/h.csv"
else
  echo "wall: hyperfine not installed (vendor/packages.txt [bench])"
fi
if command -v valgrind >/dev/null; then
  ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 | sed -n 's/.*I *refs: *//p' | tr -d ,; }
  a=$(ir lua5.4 "$tmp/empty.lua") b=$(ir "$odp" run "$tmp/empty.lua")
  echo "instructions (callgrind)  lua5.4 $a   odp $b   ratio $(echo "$a $b" | awk '{ printf "%.2f", $2 / $1 }')"
else
  echo "instructions: valgrind not installed (vendor/packages.txt [bench])"
fi
