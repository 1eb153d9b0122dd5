#!/bin/sh
# All benchmarks (make bench). Each prints its numbers and ratios against the tool users use today.
set -u
cd "$(dirname "$0")/.."
for b in bench/*_bench.lua; do echo "== $b"; build/odp run "$b"; done
for b in bench/*_bench.sh; do [ -e "$b" ] && { echo "== $b"; sh "$b"; }; done
