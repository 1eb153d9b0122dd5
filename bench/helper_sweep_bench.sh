#!/bin/sh
# The resident helper's benchmark on a private loopback sshd: a 10-point sweep with the real runner, odp against
# the scp + ssh ControlMaster loop (bench/helper_sweep.lua). ROUNDS=, POINTS= override; ODP_REAL_RUNNER names
# the runner (make bench finds the one beside the project).
set -e
cd "$(dirname "$0")/.."
make -s all >/dev/null
ODP_PATH="$PWD/tests/lib" exec build/odp run bench/helper_sweep.lua
