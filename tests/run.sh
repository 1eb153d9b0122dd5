#!/bin/sh
# The one test command (README, CI): installs what the tests need, builds odp and the test programs,
# runs every suite, and ends with "N passed, N failed, N skipped".
#   tests/run.sh                 every suite
#   tests/run.sh tests/lua/proc_test.lua tests/cli/help.t     only these
# Suites: tests/lua/*_test.lua (run by odp itself), tests/cli/*.t (cram transcripts), C unit tests
# (tests/c/*_test.c), and shell suites (tests/**/test_*.sh). Each prints TAP-like lines:
# "ok N - name", "not ok N - name", "ok N - name # SKIP reason".
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD

if [ -z "${ODP_SKIP_DEPS:-}" ]; then
  vendor/install-deps.sh test || { echo "dependency install failed"; echo "0 passed, 1 failed"; exit 1; }
fi
# ODP_BUILD / ODP_MAKEFLAGS: another build of odp (make asan sets both).
BUILD=${ODP_BUILD:-build}
eval "make -s -j2 ${ODP_MAKEFLAGS:-} BUILD=$BUILD all testprogs" >/dev/null ||
  { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
export ODP="$top/$BUILD/odp" ODP_BUILD_DIR="$top/$BUILD" ODP_TOP="$top"
export ODP_PATH="$top/tests/lib${ODP_PATH:+:$ODP_PATH}"
# The real ExecuTorch runners (x86_64; static aarch64 for qemu-user), kept beside the project, not in it:
# suites that involve a runner use them and count themselves skipped where they are absent.
peers="$(cd "$top/.." && pwd)/shared/peers/executorch"
export ODP_REAL_RUNNER="${ODP_REAL_RUNNER:-$peers/executor_runner}"
export ODP_REAL_RUNNER_AARCH64="${ODP_REAL_RUNNER_AARCH64:-$peers/executor_runner-linux-aarch64}"
logs="$top/tests/.tmp/logs"
mkdir -p "$logs"
# Every run is added to a history (lua/odp/results/history.lua): the suites' runs go to this file, never to
# the user's ~/.local/share/odp/history.db (tests/lua/history_test.lua checks that default with its own HOME).
export ODP_HISTORY="$top/tests/.tmp/history.db"
rm -f "$ODP_HISTORY" "$ODP_HISTORY-wal" "$ODP_HISTORY-shm"

if [ $# -gt 0 ]; then
  suites="$*"
else
  suites=$( (ls tests/lua/*_test.lua tests/cli/*.t 2>/dev/null
             ls "$BUILD"/tests/*_test 2>/dev/null
             find tests -name 'test_*.sh' -not -path '*/.tmp/*' 2>/dev/null | sort) | tr '\n' ' ')
fi

pass=0 fail=0 skip=0
for s in $suites; do
  case "$s" in
    *.lua) cmd="$ODP run $s" ;;
    *.t) cmd="$ODP run tests/lib/cram.lua $s" ;;
    *.sh) cmd="sh $s" ;;
    *) cmd="$s" ;;
  esac
  log="$logs/$(echo "$s" | tr '/' '_').log"
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout -k 10 "${ODP_SUITE_TIMEOUT:-900}" $cmd >"$log" 2>&1
  rc=$?
  p=$(grep -c '^ok ' "$log" | tr -d ' ')
  k=$(grep -c '^ok .*# SKIP' "$log" | tr -d ' ')
  f=$(grep -c '^not ok ' "$log" | tr -d ' ')
  p=$((p - k))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1
    echo "not ok - $s exited with status $rc" >>"$log"
  fi
  pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + k))
  printf '%-48s %4d passed %3d failed %3d skipped  %4ss\n' "$s" "$p" "$f" "$k" "$(( $(date +%s) - start ))"
  if [ "$f" -gt 0 ]; then
    grep -A15 '^not ok ' "$log" | head -60 | sed 's/^/    /'
    [ "$rc" -ne 0 ] && tail -5 "$log" | sed 's/^/    | /'
  fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
