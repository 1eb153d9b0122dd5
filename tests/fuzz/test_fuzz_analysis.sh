#!/bin/sh
# Fuzzes the ETDump and .pte readers with libFuzzer (clang, ASan + UBSan) for a bounded time each, seeded
# with the real fixtures. Prints TAP lines. ODP_FUZZ_SECONDS (default 20) bounds each run.
set -u
top=${ODP_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
secs=${ODP_FUZZ_SECONDS:-20}
work=$(mktemp -d /tmp/odp-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "#   $l"; done; }

CC=clang
FLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$top/src"
CORE="$top/src/flatbuf/flatbuf.c $top/src/util/err.c"

build() { # name sources...
  name=$1; shift
  if $CC $FLAGS -o "$work/$name" "$@" $CORE 2>"$work/$name.build.log"; then
    ok "build $name with -fsanitize=fuzzer,address,undefined"
  else
    notok "build $name" "$(tail -5 "$work/$name.build.log")"
    return 1
  fi
}

run() { # name seed-dir...
  name=$1; shift
  mkdir -p "$work/$name.corpus"
  for d in "$@"; do for f in "$d"/*; do case "$f" in *.json|*.md) ;; *) cp "$f" "$work/$name.corpus/" ;; esac; done; done
  # -timeout: one input may not take a second; -rss_limit_mb: caps bound memory; time bounded by max_total_time
  if (cd "$work" && "./$name" -max_total_time="$secs" -timeout=2 -rss_limit_mb=1024 -max_len=65536 \
      -print_final_stats=1 "$work/$name.corpus" >"$work/$name.log" 2>&1); then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$name.log" | grep -o '[0-9]*$')
    ok "$name: ${secs}s, ${runs:-?} inputs, no crash, leak or undefined behaviour"
  else
    notok "$name found a failure (reproducer in the log)" "$(grep -E 'ERROR|SUMMARY|runtime error' "$work/$name.log" | head -5)"
    mkdir -p "$top/tests/.tmp" && cp "$work/$name.log" "$top/tests/.tmp/$name.log" && cp "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$top/tests/.tmp/" 2>/dev/null
  fi
}

build etdump_fuzz "$top/tests/fuzz/etdump_fuzz.c" "$top/src/etdump/etdump.c" "$top/src/etdump/blocks.c" && \
  run etdump_fuzz "$top/tests/fixtures/etdump"
build pte_fuzz "$top/tests/fuzz/pte_fuzz.c" "$top/src/pte/pte.c" && \
  run pte_fuzz "$top/tests/fixtures/pte"
