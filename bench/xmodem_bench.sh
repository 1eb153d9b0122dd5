#!/bin/sh
# XMODEM-1K file transfer, odp vs lrzsz `sx -k`, each sending to the same receiver (lrzsz `rx -X -c` on pipes
# behind a socat pty: docs/sources.md §5) over the same kind of pty. Prints medians and the ratio (goal >= 1.0x).
#   sh bench/xmodem_bench.sh [MiB] [RUNS]
set -u
cd "$(dirname "$0")/.." || exit 1
ODP=${ODP:-build/odp}
mib=${1:-4}
runs=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c $((mib * 1048576)) /dev/urandom >"$tmp/in.bin"
cat >"$tmp/send.lua" <<'EOS'
local s = assert(require("odp.serial").open{ port = arg[1] })
assert(require("odp.xmodem").send(s, arg[2], { mode = "1k" }))
EOS
now() { date +%s.%N; }
one() { # one TOOL -> seconds on stdout
  link="$tmp/pty"; rm -f "$tmp/rx.bin" "$link"
  (cd "$tmp" && exec socat pty,raw,echo=0,link="$link" EXEC:"rx -X -c rx.bin",pipes 2>/dev/null) & sp=$!
  i=0; while [ ! -e "$link" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  t0=$(now)
  if [ "$1" = odp ]; then "$ODP" run "$tmp/send.lua" "$link" "$tmp/in.bin"
  else sx -X -k "$tmp/in.bin" <"$link" >"$link" 2>/dev/null; fi
  t1=$(now)
  wait "$sp"
  cmp -s "$tmp/in.bin" "$(dd if="$tmp/rx.bin" bs=1048576 count="$mib" 2>/dev/null >"$tmp/cut.bin"; echo "$tmp/cut.bin")" ||
    echo "warning: $1 transfer not identical" >&2
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
o=$(for i in $(seq "$runs"); do one odp; done | median)
s=$(for i in $(seq "$runs"); do one sx; done | median)
awk -v o="$o" -v s="$s" -v m="$mib" 'BEGIN {
  printf "xmodem-1K %d MiB over a pty to rx:  odp %.3f s (%.0f KB/s)   sx -k %.3f s (%.0f KB/s)   speed ratio odp/sx %.2fx (goal >= 1.0x)\n",
    m, o, m * 1024 / o, s, m * 1024 / s, s / o }'
