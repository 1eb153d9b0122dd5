#!/bin/sh
# The Raspberry Pi 5 flow with no Pi: Debian packages (build + pi-twin groups of vendor/packages.txt), build
# odp, build and boot the Pi 5 twin (Debian's arm64 kernel under qemu-system-aarch64 -cpu cortex-a76,
# tests/board_twin/README.md), run scripts/rpi5.lua on it over SSH, stop the twin. The runner is ExecuTorch's
# static aarch64 executor_runner ($ODP_REAL_RUNNER_AARCH64, or the copy kept beside the project); where there
# is none, the test runner program built for aarch64 stands in, and the demo says so. Timings are the
# emulator's: the report says EMULATED.
set -eu
cd "$(dirname "$0")/.."
vendor/install-deps.sh build
vendor/install-deps.sh pi-twin
make -s -j2 all build/tests/fake_runner-aarch64 >/dev/null
mkdir -p runs
state=runs/pi-twin
tests/board_twin/start.sh rpi5 "$state"
trap 'tests/board_twin/stop.sh "$state"' EXIT INT TERM
. "$state/env"
set -- --host "$ODP_TWIN_USER@127.0.0.1" --port "$ODP_TWIN_PORT" --identity "$ODP_TWIN_IDENTITY" \
  --known-hosts "$ODP_TWIN_KNOWN_HOSTS" --model tests/fixtures/pte/add_arduino.pte -n 10 --out runs/demo-pi.json
runner=${ODP_REAL_RUNNER_AARCH64:-../shared/peers/executorch/executor_runner-linux-aarch64}
if [ -f "$runner" ]; then
  build/odp run scripts/rpi5.lua "$@" --runner "$runner" --etdump runs/demo-pi.etdump
else
  echo "odp demo-pi: no real executor_runner at $runner (set ODP_REAL_RUNNER_AARCH64); profiling the test runner program" >&2
  build/odp run scripts/rpi5.lua "$@" --runner build/tests/fake_runner-aarch64
fi
