#!/bin/bash
# What memory by phase costs a sweep over adb (issue 30): the same 10-point sweep with the real ExecuTorch runner
# on the adb device emulator (tests/adbemu) held by Debian's adb server, as a user types it, with memory by phase
# (the default: each point's 1 kHz timeline comes back) and with --no-memory, alternating on fresh device dirs:
#   odp run scripts/sweep.lua --flow scripts/x300pro.lua --adb server -p num_executions=1,...,10 [--no-memory]
# ODP_BEFORE=path/to/another/build/odp adds the same pair for that build (e.g. one whose helper pulled each
# timeline with sync: services of its own), in the same rounds. ROUNDS (default 5), POINTS (default 10).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/adb_sweep_env.sh"
builds="this"
[ -n "${ODP_BEFORE:-}" ] && builds="this before"
# sweep BUILD NAME [--no-memory]: one timed sweep into times.BUILD.NAME; the runner and model are pushed (and the
# helper brought up) by a first sweep on the same device dir, so a round times the points, not the pushes
sweep() {
    local build=$1 name=$2; shift 2
    local odp=$ODP dir=/data/local/tmp/$build-$name
    [ "$build" = before ] && odp=$ODP_BEFORE
    local args=(run "$top/scripts/sweep.lua" --flow "$top/scripts/x300pro.lua" --adb server --serial "$serial"
        --remote-dir "$dir" --runner "$RUNNER" --model "$MODEL" --runs-dir "$work/runs" -q "$@")
    if [ ! -e "$work/warm.$build.$name" ]; then
        "$odp" "${args[@]}" -p num_executions=1 --out "$work/warm.$build.$name" >/dev/null 2>"$work/odp.err" \
            || { echo "odp sweep failed:"; cat "$work/odp.err"; exit 1; }
    fi
    local t0 t1
    t0=$(now)
    "$odp" "${args[@]}" -p "num_executions=$points" --out "$work/s.$build.$name.$r.jsonl" >/dev/null 2>"$work/odp.err" \
        || { echo "odp sweep failed:"; cat "$work/odp.err"; exit 1; }
    t1=$(now)
    awk "BEGIN{print $t1 - $t0}" >>"$work/times.$build.$name"
}
for r in $(seq "$ROUNDS"); do
    for b in $builds; do
        sweep "$b" memory
        sweep "$b" nomemory --no-memory
    done
done
echo "adb sweep, $POINTS points, real runner, through Debian's adb server, helper on the device, median of $ROUNDS rounds:"
for b in $builds; do
    m=$(median <"$work/times.$b.memory")
    n=$(median <"$work/times.$b.nomemory")
    printf '  %-6s with memory by phase %6.2f s, --no-memory %6.2f s: memory costs %.2fx\n' "$b" "$m" "$n" \
        "$(awk "BEGIN{print $m / $n}")"
    echo "         rounds (memory; --no-memory): $(tr '\n' ' ' <"$work/times.$b.memory"); $(tr '\n' ' ' <"$work/times.$b.nomemory")"
done
