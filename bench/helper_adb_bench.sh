#!/bin/bash
# The resident helper over adb: a 10-point sweep with the real ExecuTorch runner on the adb device emulator
# (tests/adbemu) held by Debian's adb server, the command a user types against the loop a user would write:
#   odp:  odp run scripts/sweep.lua --flow scripts/x300pro.lua --adb server -p num_executions=1,...,10
#   loop: adb push the runner and model once, then one `adb shell "/usr/bin/time -v ./executor_runner
#         --num_executions N"` per point, through the same server
# ROUNDS (default 5) alternate the two on fresh device dirs; medians and the ratio are printed.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/adb_sweep_env.sh"
for r in $(seq "$ROUNDS"); do
    t0=$(now)
    "$ODP" run "$top/scripts/sweep.lua" --flow "$top/scripts/x300pro.lua" --adb server --serial "$serial" \
        --remote-dir "/data/local/tmp/odp$r" --runner "$RUNNER" --model "$MODEL" -p "num_executions=$points" \
        --out "$work/s$r.jsonl" --runs-dir "$work/runs" -q >/dev/null 2>"$work/odp.err" \
        || { echo "odp sweep failed:"; cat "$work/odp.err"; exit 1; }
    t1=$(now)
    d=/data/local/tmp/loop$r
    adb -s "$serial" shell "mkdir -p $d" && adb -s "$serial" push "$RUNNER" "$MODEL" "$d/" >/dev/null
    for n in $(seq "$POINTS"); do
        adb -s "$serial" shell "cd $d && /usr/bin/time -v ./executor_runner --model_path add_arduino.pte --num_executions $n" \
            >/dev/null 2>&1 || { echo "adb loop failed"; exit 1; }
    done
    t2=$(now)
    echo "$(awk "BEGIN{print $t1 - $t0}") $(awk "BEGIN{print $t2 - $t1}")" >>"$work/times"
done
o=$(cut -d' ' -f1 "$work/times" | median)
l=$(cut -d' ' -f2 "$work/times" | median)
echo "adb sweep, $POINTS points, real runner, through Debian's adb server, median of $ROUNDS rounds:"
printf '  odp run scripts/sweep.lua --flow scripts/x300pro.lua   %6.2f s\n' "$o"
printf '  adb push + adb shell loop                              %6.2f s   odp is %.1fx faster\n' "$l" \
    "$(awk "BEGIN{print $l / $o}")"
echo "  rounds (odp loop): $(tr '\n' ';' <"$work/times")"
