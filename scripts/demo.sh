#!/bin/sh
# The main job on a default that needs no hardware: the host flow, profiling the test runner program
# (it speaks executor_runner's flags and output) on a real .pte, with an ETDump.
set -eu
cd "$(dirname "$0")/.."
vendor/install-deps.sh build
make -s -j2 all build/tests/fake_runner >/dev/null
mkdir -p runs
ODP_FAKE_ETDUMP=tests/fixtures/etdump/add_n10.etdump \
  build/odp run scripts/host.lua --runner build/tests/fake_runner \
  --model tests/fixtures/pte/add_arduino.pte -n 10 --etdump runs/demo.etdump --out runs/demo.json
