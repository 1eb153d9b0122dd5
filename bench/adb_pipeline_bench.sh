#!/bin/bash
# Issue 38's pipelined sweep on adb: the same sweep with the real ExecuTorch runner pipelined (the default) and with
# --no-pipeline, alternating, on the adb device emulator (tests/adbemu) behind tests/c/delay_relay (DELAY_MS each
# way, default 25: RTT 50 ms, adb over Wi-Fi or wireless debugging), as a user types it:
#   odp run scripts/sweep.lua --flow scripts/x300pro.lua --adb server -p num_executions=1,...,10 [--no-pipeline]
# Debian's adb server holds the device through the relay (`adb connect` of the relay's port), so the server's link
# to the device has the round trip; VIA=direct takes the relay with odp's own connection (--adb tcp:) instead.
# The helper, runner and model are on the device before the rounds. ROUNDS (default 5), POINTS (default 10), SCALE
# (default 1): point i runs i*SCALE executions (the pipeline hides at most the part of a round trip its run lasts).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/adb_sweep_env.sh"
DELAY_MS=${DELAY_MS:-25}
VIA=${VIA:-server}
SCALE=${SCALE:-1}
points=$(seq -s, "$SCALE" "$SCALE" $((POINTS * SCALE)))
[ -x "$out/delay_relay" ] || make -s -C "$top" BUILD="${ODP_BUILD_DIR:-$top/build}" testprogs >/dev/null || exit 1
"$out/delay_relay" "$DELAY_MS" 127.0.0.1 "$port" "$work/relay.counts" >"$work/relay.port" 2>&1 &
relay_pid=$!
trap 'kill "$relay_pid" 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do [ -s "$work/relay.port" ] && break; sleep 0.05; done
rport=$(head -1 "$work/relay.port")
# the emulator serves one connection at a time: the server lets go of its own to the emulator
adb disconnect "$serial" >/dev/null
if [ "$VIA" = direct ]; then
    how=(--adb "tcp:127.0.0.1:$rport")
else
    adb connect "127.0.0.1:$rport" >/dev/null
    timeout 10 adb -s "127.0.0.1:$rport" wait-for-device
    how=(--adb server --serial "127.0.0.1:$rport")
fi
args=(run "$top/scripts/sweep.lua" --flow "$top/scripts/x300pro.lua" "${how[@]}" --remote-dir /data/local/tmp/pipe
    --runner "$RUNNER" --model "$MODEL" --runs-dir "$work/runs" -q)
"$ODP" "${args[@]}" -p num_executions=1 --out "$work/warm.jsonl" >/dev/null 2>"$work/odp.err" \
    || { echo "odp sweep failed:"; cat "$work/odp.err"; exit 1; }
# sweep NAME [--no-pipeline]: one timed sweep, its seconds appended to times.NAME
sweep() {
    local name=$1; shift
    local t0 t1
    t0=$(now)
    "$ODP" "${args[@]}" "$@" -p "num_executions=$points" --out "$work/s.$name.$r.jsonl" >/dev/null 2>"$work/odp.err" \
        || { echo "odp sweep failed:"; cat "$work/odp.err"; exit 1; }
    t1=$(now)
    awk "BEGIN{print $t1 - $t0}" >>"$work/times.$name"
}
for r in $(seq "$ROUNDS"); do
    sweep piped
    sweep one --no-pipeline
done
p=$(median <"$work/times.piped")
o=$(median <"$work/times.one")
echo "adb sweep, $POINTS points ($points executions), real runner, RTT $((2 * DELAY_MS)) ms (via $VIA), median of $ROUNDS rounds:"
printf '  pipelined (the default)   %6.2f s\n' "$p"
printf '  --no-pipeline             %6.2f s   pipelined is %.2fx faster, %.0f ms a point (%.2f round trips)\n' "$o" \
    "$(awk "BEGIN{print $o / $p}")" "$(awk "BEGIN{print ($o - $p) * 1000 / $POINTS}")" \
    "$(awk "BEGIN{print ($o - $p) * 1000 / $POINTS / (2 * $DELAY_MS)}")"
echo "  rounds: pipelined $(tr '\n' ' ' <"$work/times.piped"); --no-pipeline $(tr '\n' ' ' <"$work/times.one")"
