#!/bin/sh
# Bounded libFuzzer runs of every target under tests/fuzz (ODP_FUZZ_SECONDS each, default 10).
exec "$(dirname "$0")/run.sh"
