#!/bin/sh
# The one test command (README, CI): installs what the tests need, builds odp and the test programs,
# runs every suite, and ends with "N passed, N failed, N skipped".
#   tests/run.sh                 every suite
#   tests/run.sh tests/lua/proc_test.lua tests/cli/help.t     only these
# Suites, found by name (no list to edit: a new file that matches is run):
#   tests/lua/*_test.lua (run by odp itself, through tests/lib/t.lua), tests/cli/*.t (cram transcripts),
#   C unit tests (tests/c/*_test.c, built into $BUILD/tests/: one that is not built is a failure),
#   shell suites (tests/**/test_*.sh, through tests/lib/tap.sh).
# A suite's stdout is one TAP stream (its stderr goes to the log only): "ok N - name", "not ok N - name",
# "ok N - name # SKIP reason", numbered 1..N in order, and one plan line "1..N" (t.lua's T.done prints it).
# A suite fails when it prints no plan, runs fewer or more tests than it planned, numbers them out of order,
# prints nothing, or exits non-zero; a suite named on the command line that does not exist fails.
# "ok N - name # rig" is a check of a test rig itself (an emulator, a twin), counted apart ("N rig checks"),
# not as a test of odp. tests/lua/harness_test.lua checks all of this.
# Adding a suite: name it as above. A Lua suite ends with T.done(); a C one prints "1..N" at the end; a shell
# one sources tests/lib/tap.sh, runs its Lua parts through tap_run and ends with tap_done.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD

if [ -z "${ODP_SKIP_DEPS:-}" ]; then
  vendor/install-deps.sh test || { echo "dependency install failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
fi
# ODP_BUILD / ODP_MAKEFLAGS: another build of odp (make asan sets both).
BUILD=${ODP_BUILD:-build}
eval "make -s -j2 ${ODP_MAKEFLAGS:-} BUILD=$BUILD all testprogs" >/dev/null ||
  { echo "build failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
export ODP="$top/$BUILD/odp" ODP_BUILD_DIR="$top/$BUILD" ODP_TOP="$top"
export ODP_PATH="$top/tests/lib${ODP_PATH:+:$ODP_PATH}"
# The real ExecuTorch runners (x86_64; static aarch64 for qemu-user), kept beside the project, not in it:
# suites that involve a runner use them and count themselves skipped where they are absent.
peers="$(cd "$top/.." && pwd)/shared/peers/executorch"
export ODP_REAL_RUNNER="${ODP_REAL_RUNNER:-$peers/executor_runner}"
export ODP_REAL_RUNNER_AARCH64="${ODP_REAL_RUNNER_AARCH64:-$peers/executor_runner-linux-aarch64}"
# ExecuTorch's LLM runner and the tiny model it runs (llama_main, toy.pte, tok.bin): the --llm suites
export ODP_REAL_LLM="${ODP_REAL_LLM:-$peers/llm}"
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
             for c in tests/c/*_test.c; do echo "$BUILD/tests/$(basename "$c" .c)"; done
             find tests -name 'test_*.sh' -not -path '*/.tmp/*' 2>/dev/null | sort) | tr '\n' ' ')
fi
[ -n "$suites" ] || { echo "no suites found"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# tap LOG: the counts of one suite's TAP stream, as shell assignments (p k r f), and why its plan is wrong (bad)
tap() {
  awk '
    /^(not )?ok( |$)/ {
      n++
      num = $0; sub(/^(not )?ok ?/, "", num); sub(/[^0-9].*$/, "", num)
      if (num != "" && num + 0 != n && bad == "") bad = sprintf("test %d is numbered %s", n, num)
      if ($0 ~ /^not ok/) f++
      else if ($0 ~ /# SKIP/) k++
      else if ($0 ~ /# rig( |$)/) r++
      else p++
      next
    }
    /^1\.\.[0-9]+$/ { if (plan != "") bad = "two plans"; plan = substr($0, 4) + 0 }
    END {
      if (n == 0 && plan == "") bad = "printed no TAP"
      else if (plan == "") bad = "printed no plan (1..N)"
      else if (plan == 0) bad = "planned no tests"
      else if (plan != n && bad == "") bad = sprintf("planned %d tests and ran %d", plan, n)
      printf "p=%d k=%d r=%d f=%d bad=\"%s\"\n", p, k, r, f, bad
    }' "$1"
}

pass=0 fail=0 skip=0 rig=0
for s in $suites; do
  case "$s" in
    *.lua) cmd="$ODP run $s" ;;
    *.t) cmd="$ODP run tests/lib/cram.lua $s" ;;
    *.sh) cmd="sh $s" ;;
    *) cmd="$s" ;;
  esac
  log="$logs/$(echo "$s" | tr '/' '_').log"
  start=$(date +%s)
  rc=0
  if [ -f "$s" ]; then
    # shellcheck disable=SC2086
    timeout -k 10 "${ODP_SUITE_TIMEOUT:-900}" $cmd >"$log" 2>"$log.stderr"
    rc=$?
    eval "$(tap "$log")"
    if [ -n "$bad" ]; then
      echo "not ok - $s $bad" >>"$log"
      f=$((f + 1))
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      echo "not ok - $s exited with status $rc" >>"$log"
      f=1
    fi
  else
    echo "not ok - $s does not exist" >"$log"; : >"$log.stderr"
    p=0 k=0 r=0 f=1
  fi
  pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + k)) rig=$((rig + r))
  printf '%-48s %4d passed %3d failed %3d skipped %3d rig checks  %4ss\n' "$s" "$p" "$f" "$k" "$r" \
    "$(( $(date +%s) - start ))"
  if [ "$f" -gt 0 ]; then
    grep -A15 '^not ok ' "$log" | head -60 | sed 's/^/    /'
    [ "$rc" -ne 0 ] && tail -5 "$log.stderr" | sed 's/^/    | /'
  fi
done
echo "$rig rig checks (the test rigs checking themselves; not counted below)"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
