#!/bin/bash
# Push and pull of a 256 MB file to the adb device emulator (tests/adbemu) over TCP on loopback:
# odp directly (odp.adb, its own connection), odp through Google's adb server (Debian's adb 29.0.6, the server
# holding the emulator) and Google's client through the same server. Prints MB/s and ratios against adb
# (goal >= 1.0x). ADB_BENCH_MB changes the size; each figure is the best of ADB_BENCH_RUNS (default 3).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
ODP=${ODP:-$top/build/odp}
out=${ODP_BUILD_DIR:-$top/build}/tests
make -s -C "$top/tests/adbemu" OUT="$out" >/dev/null || exit 1
MB=${ADB_BENCH_MB:-256}
RUNS=${ADB_BENCH_RUNS:-3}
. "$top/bench/adbemu_env.sh"
head -c $((MB * 1024 * 1024)) /dev/urandom >"$work/big"

now() { date +%s.%N; }
best() { sort -g | head -1; }

cat >"$work/odp.lua" <<LUA
local adb = require("odp.adb")
local how, what, src, dst = ...
local d = assert(adb.connect { transport = how, serial = how == "server" and "127.0.0.1:$port" or nil })
assert(d[what](d, src, dst))
d:close()
LUA
odp_time() { # what src dst -> seconds ($how: tcp:... direct, or server)
    local t0 t1
    t0=$(now); "$ODP" run "$work/odp.lua" "$how" "$1" "$2" "$3" >/dev/null || { echo "odp $1 failed" >&2; exit 1; }; t1=$(now)
    awk "BEGIN{print $t1 - $t0}"
}
adb_time() {
    local t0 t1
    t0=$(now); timeout 300 adb -s "127.0.0.1:$port" "$1" "$2" "$3" >/dev/null || { echo "adb $1 failed" >&2; exit 1; }; t1=$(now)
    awk "BEGIN{print $t1 - $t0}"
}

# adbemu serves one connection at a time: odp directly first, then the server (it keeps the connection)
echo x >"$work/one"
how=tcp:127.0.0.1:$port
odp_fixed=$(for _ in $(seq "$RUNS"); do odp_time push "$work/one" /data/local/tmp/one; done | best)
odp_push=$(for _ in $(seq "$RUNS"); do odp_time push "$work/big" /data/local/tmp/o; done | best)
odp_pull=$(for _ in $(seq "$RUNS"); do rm -f "$work/o.back"; odp_time pull /data/local/tmp/o "$work/o.back"; done | best)
cmp -s "$work/big" "$work/o.back" || { echo "odp pull differs"; exit 1; }
adb connect "127.0.0.1:$port" >/dev/null
timeout 10 adb -s "127.0.0.1:$port" wait-for-device
adb_fixed=$(for _ in $(seq "$RUNS"); do adb_time push "$work/one" /data/local/tmp/one; done | best)
adb_push=$(for _ in $(seq "$RUNS"); do adb_time push "$work/big" /data/local/tmp/a; done | best)
adb_pull=$(for _ in $(seq "$RUNS"); do rm -f "$work/a.back"; adb_time pull /data/local/tmp/a "$work/a.back"; done | best)
cmp -s "$work/big" "$work/a.back" || { echo "adb pull differs"; exit 1; }
how=server
srv_fixed=$(for _ in $(seq "$RUNS"); do odp_time push "$work/one" /data/local/tmp/one; done | best)
srv_push=$(for _ in $(seq "$RUNS"); do odp_time push "$work/big" /data/local/tmp/s; done | best)
srv_pull=$(for _ in $(seq "$RUNS"); do rm -f "$work/s.back"; odp_time pull /data/local/tmp/s "$work/s.back"; done | best)
cmp -s "$work/big" "$work/s.back" || { echo "odp pull through the server differs"; exit 1; }

rate() { awk "BEGIN{printf \"%.0f\", $MB / $1}"; }
ratio() { awk "BEGIN{printf \"%.2f\", $1 / $2}"; }
sub() { awk "BEGIN{d = $1 - $2; print (d > 0.001 ? d : 0.001)}"; }
printf 'adb transfer, %d MB, loopback TCP to adbemu (best of %d)\n' "$MB" "$RUNS"
printf '  fixed cost (1-byte push: start, connect): odp direct %.0f ms, odp via server %.0f ms, adb %.0f ms\n' \
    "$(awk "BEGIN{print $odp_fixed * 1000}")" "$(awk "BEGIN{print $srv_fixed * 1000}")" "$(awk "BEGIN{print $adb_fixed * 1000}")"
for what in push pull; do
    a=$(eval echo "\$adb_$what"); at=$(sub "$a" "$adb_fixed")
    for who in odp srv; do
        o=$(eval echo "\$${who}_$what"); ot=$(sub "$o" "$(eval echo "\$${who}_fixed")")
        label=$([ "$who" = odp ] && echo "odp direct    " || echo "odp via server")
        printf '  %s %s: whole command %4s MB/s vs adb %4s MB/s, ratio %sx | transfer only %4s vs %4s, ratio %sx\n' \
            "$what" "$label" "$(rate "$o")" "$(rate "$a")" "$(ratio "$a" "$o")" "$(rate "$ot")" "$(rate "$at")" "$(ratio "$at" "$ot")"
    done
done
