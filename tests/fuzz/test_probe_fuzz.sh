#!/bin/sh
# Bounded libFuzzer runs of the XMODEM receiver and the RTT ring reader (fuzzed target memory), seeded from
# tests/fuzz/corpus/{xmodem,rtt}. ODP_FUZZ_SECONDS each (default 10).
top=${ODP_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${ODP_BUILD_DIR:-$top/build}
cd "$top" || exit 1
n=0
for pair in xmodem_recv_fuzz:xmodem rtt_ring_fuzz:rtt; do
  t=${pair%%:*} seeds=tests/fuzz/corpus/${pair#*:}
  n=$((n + 1))
  if make -s BUILD="$build" "$build/fuzz/$t" >/dev/null 2>"$build/$t.build.log"; then
    echo "ok $n - $t builds"
  else
    echo "not ok $n - $t builds"; sed 's/^/#   /' "$build/$t.build.log"; continue
  fi
  work=$(mktemp -d /tmp/odp-$t.XXXXXX)
  n=$((n + 1))
  if "$build/fuzz/$t" -max_total_time="${ODP_FUZZ_SECONDS:-10}" -max_len=8192 -timeout=5 -rss_limit_mb=1024 \
      -print_final_stats=1 -artifact_prefix="$build/$t-" "$work" "$seeds" >"$build/$t.log" 2>&1; then
    echo "ok $n - $t ran $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/$t.log" | grep -o '[0-9]*$') inputs without a crash"
  else
    echo "not ok $n - $t found a crash (reproducer: $build/$t-*)"; grep -A25 'ERROR' "$build/$t.log" | head -40 | sed 's/^/#   /'
  fi
  rm -rf "$work"
done
