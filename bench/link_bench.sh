#!/bin/sh
# What a sweep costs on a link with a round-trip time (issue 38): odp against the scp + ssh ControlMaster loop
# over tests/c/delay_relay in front of a private loopback sshd (bench/link_bench.lua). DELAYS= (one-way ms) and
# POINTS= override; ODP_REAL_RUNNER names the runner (make bench finds the one beside the project). SERVER=dropbear
# (DROPBEAR_W=BYTES) puts Dropbear in sshd's place.
set -e
cd "$(dirname "$0")/.."
make -s all testprogs >/dev/null
ODP_PATH="$PWD/tests/lib" exec build/odp run bench/link_bench.lua
