#!/bin/sh
# Fault soak on a private loopback sshd: a long sweep while connections drop, sshd restarts and sessions stop
# at random (bench/fault_soak.lua). ODP_REAL_RUNNER=.../executor_runner sh bench/fault_soak.sh [POINTS] [SEED]
# (long: not in bench/run.sh)
set -e
cd "$(dirname "$0")/.."
make -s all >/dev/null
ODP_PATH="$PWD/tests/lib" exec build/odp run bench/fault_soak.lua "$@"
