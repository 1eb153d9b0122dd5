#!/bin/sh
# The Pi 5 twin (tests/board_twin): boot + one rpi5 flow, what `make demo-pi` costs after the first build
# (goal < 30 s on the 2-core build machine), and the flow on the booted twin against what a user types
# without odp: OpenSSH's scp of runner + model, then ssh running it (no rusage, no parsing, no record).
#   sh bench/pi_twin_bench.sh [ROUNDS]       (default 3; needs the real static aarch64 runner)
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3}
runner=${ODP_REAL_RUNNER_AARCH64:-$(cd .. && pwd)/shared/peers/executorch/executor_runner-linux-aarch64}
[ -f "$runner" ] || { echo "pi_twin_bench: no aarch64 runner at $runner (ODP_REAL_RUNNER_AARCH64); skipped"; exit 0; }
make -s -j2 all >/dev/null
tests/board_twin/build.sh
model=tests/fixtures/pte/add_arduino.pte
tmp=$(mktemp -d /tmp/odp-pibench.XXXXXX)
trap 'tests/board_twin/stop.sh "$tmp/state" 2>/dev/null; rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for i in $(seq "$rounds"); do
	t0=$(now)
	tests/board_twin/start.sh rpi5 "$tmp/state"
	t1=$(now)
	. "$tmp/state/env"
	ssh_opts="-i $ODP_TWIN_IDENTITY -o UserKnownHostsFile=$ODP_TWIN_KNOWN_HOSTS -o BatchMode=yes"
	build/odp run scripts/rpi5.lua --host "pi@127.0.0.1" --port "$ODP_TWIN_PORT" --identity "$ODP_TWIN_IDENTITY" \
		--known-hosts "$ODP_TWIN_KNOWN_HOSTS" --runner "$runner" --model "$model" -n 10 -q --runs-dir "$tmp/runs" >/dev/null
	t2=$(now)
	# the same flow again: everything hash-skipped
	build/odp run scripts/rpi5.lua --host "pi@127.0.0.1" --port "$ODP_TWIN_PORT" --identity "$ODP_TWIN_IDENTITY" \
		--known-hosts "$ODP_TWIN_KNOWN_HOSTS" --runner "$runner" --model "$model" -n 10 -q --runs-dir "$tmp/runs" >/dev/null
	t3=$(now)
	# by hand: scp both files (always: scp cannot skip), then run
	# shellcheck disable=SC2086
	scp -q -P "$ODP_TWIN_PORT" $ssh_opts "$runner" "$model" pi@127.0.0.1:/tmp/
	# shellcheck disable=SC2086
	ssh -p "$ODP_TWIN_PORT" $ssh_opts pi@127.0.0.1 \
		"/tmp/$(basename "$runner") --model_path /tmp/$(basename "$model") --num_executions 10" >/dev/null 2>&1
	t4=$(now)
	tests/board_twin/stop.sh "$tmp/state"
	echo "$t0 $t1 $t2 $t3 $t4" | awk -v i="$i" '{ printf "round " i ": boot %.1f s, first flow %.1f s (boot + flow %.1f s), flow again %.1f s, scp + ssh %.1f s\n", $2-$1, $3-$2, $3-$1, $4-$3, $5-$4 }'
	echo "$t0 $t1 $t2 $t3 $t4" >>"$tmp/times"
done
boot=$(awk '{ print $2 - $1 }' "$tmp/times" | median)
first=$(awk '{ print $3 - $2 }' "$tmp/times" | median)
total=$(awk '{ print $3 - $1 }' "$tmp/times" | median)
again=$(awk '{ print $4 - $3 }' "$tmp/times" | median)
manual=$(awk '{ print $5 - $4 }' "$tmp/times" | median)
echo "median of $rounds: boot $boot s, first flow $first s, boot + first flow $total s (goal < 30 s)"
echo "flow on the booted twin: odp $first s first (uploads), $again s again (hash-skipped); scp + ssh $manual s" |
	awk -v a="$again" -v m="$manual" '{ print; printf "odp (hash-skipped) / scp + ssh: %.2fx\n", a / m }'
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average: $load"
