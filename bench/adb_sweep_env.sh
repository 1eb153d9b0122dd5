# Sourced by the adb sweep benches (helper_adb_bench.sh, helper_memory_adb_bench.sh, adb_pipeline_bench.sh), after
# `top` is set: the real runner (skipped without it or Debian's adb), the adb device emulator (bench/adbemu_env.sh)
# held by a private adb server at $serial, ROUNDS and POINTS ($points: 1,...,POINTS), and the now/median helpers.
ODP=${ODP:-$top/build/odp}
out=${ODP_BUILD_DIR:-$top/build}/tests
RUNNER=${ODP_REAL_RUNNER:-$(cd "$top/.." && pwd)/shared/peers/executorch/executor_runner}
[ -x "$RUNNER" ] || { echo "skipped: set ODP_REAL_RUNNER to a real executor_runner"; exit 0; }
command -v adb >/dev/null || { echo "skipped: Debian's adb is missing"; exit 0; }
make -s -C "$top/tests/adbemu" OUT="$out" >/dev/null || exit 1
ROUNDS=${ROUNDS:-5}
POINTS=${POINTS:-10}
MODEL=$top/tests/fixtures/pte/add_arduino.pte
. "$top/bench/adbemu_env.sh"
serial=127.0.0.1:$port
adb start-server >/dev/null 2>&1
adb connect "$serial" >/dev/null
timeout 10 adb -s "$serial" wait-for-device
points=$(seq -s, 1 "$POINTS")
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
