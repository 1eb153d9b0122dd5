#!/bin/sh
# All benchmarks (make bench). Each prints its numbers and ratios against the tool users use today.
set -u
cd "$(dirname "$0")/.."
# the real ExecuTorch runner, where one is kept beside the project (benches that need it say so otherwise)
peers="$(cd .. && pwd)/shared/peers/executorch"
export ODP_REAL_RUNNER="${ODP_REAL_RUNNER:-$peers/executor_runner}"
for b in bench/*_bench.lua; do echo "== $b"; build/odp run "$b"; done
[ -e bench/ssh_sweep.sh ] && { echo "== bench/ssh_sweep.sh"; sh bench/ssh_sweep.sh; }
for b in bench/*_bench.sh; do [ -e "$b" ] && { echo "== $b"; sh "$b"; }; done
