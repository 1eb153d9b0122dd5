#!/bin/sh
# The host flow on this machine: ExecuTorch's real executor_runner ($ODP_REAL_RUNNER, or the copy kept beside
# the project in ../shared/peers/executorch) on a real .pte, with an ETDump and a stopping rule; where no real
# runner is at hand, the test runner program (it speaks executor_runner's flags and output) stands in, and
# the demo says so.
set -eu
cd "$(dirname "$0")/.."
vendor/install-deps.sh build
make -s -j2 all build/tests/fake_runner >/dev/null
mkdir -p runs
runner=${ODP_REAL_RUNNER:-../shared/peers/executorch/executor_runner}
if [ -x "$runner" ]; then
  exec build/odp run scripts/host.lua --runner "$runner" --model tests/fixtures/pte/add_arduino.pte -n 10 \
    --target-ci 5 --max-time 20 --etdump runs/demo.etdump --out runs/demo.json
fi
echo "odp demo: no real executor_runner at $runner (set ODP_REAL_RUNNER); profiling the test runner program" >&2
ODP_FAKE_ETDUMP="$PWD/tests/fixtures/etdump/add_n10.etdump" \
  exec build/odp run scripts/host.lua --runner build/tests/fake_runner \
  --model tests/fixtures/pte/add_arduino.pte -n 10 --etdump runs/demo.etdump --out runs/demo.json
