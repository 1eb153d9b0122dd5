#!/bin/sh
# The Alif E8 flow end to end on its QEMU twin, from a fresh machine: Debian packages (build + twin groups of
# vendor/packages.txt), build odp, then build the twin firmware with the model embedded, flash it with the
# SETOOLS stand-ins, XMODEM ext_flash.bin over RTT, SWD reset, capture 5 inferences + the ETDump, report.
set -eu
cd "$(dirname "$0")/.."
vendor/install-deps.sh build
vendor/install-deps.sh twin
make -s -j2 all >/dev/null
exec build/odp run scripts/alif_e8.lua --device devices/twin_m55.lua \
  --model tests/fixtures/pte/mnist_ethos_u55.pte --inferences 5 --format json --out r.json
