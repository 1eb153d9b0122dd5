#!/bin/sh
# Fault soak on a private loopback sshd: a long sweep while connections drop, sshd restarts and sessions stop
# at random (bench/fault_soak.lua). sh bench/fault_soak.sh [POINTS] [SEED]
set -e
cd "$(dirname "$0")/.."
make -s all >/dev/null
: "${ODP_REAL_RUNNER:=$PWD/../shared/peers/executorch/executor_runner}"
export ODP_REAL_RUNNER
ODP_PATH="$PWD/tests/lib" exec build/odp run bench/fault_soak.lua "$@"
