#!/bin/sh
# SSH benchmark on a private loopback sshd: 20-point sweep (odp vs scp+ssh loop vs ControlMaster loop) and
# 256 MB SFTP put/get (odp vs scp, sftp). Prints ratios. POINTS=, MB= override the sizes.
set -e
cd "$(dirname "$0")/.."
make -s all >/dev/null
ODP_PATH="$PWD/tests/lib" exec build/odp run bench/ssh_sweep.lua
