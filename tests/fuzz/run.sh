#!/bin/sh
# Builds the libFuzzer targets (clang) and runs each for a bounded time: tests/fuzz/run.sh [SECONDS]
# Prints TAP lines. A crash leaves its reproducer in tests/.tmp/fuzz/.
set -u
cd "$(dirname "$0")/../.." || exit 1
secs=${1:-${ODP_FUZZ_SECONDS:-10}}
out=tests/.tmp/fuzz
mkdir -p "$out"
n=0
for t in tests/fuzz/*_fuzz.c; do
  name=$(basename "$t" .c)
  n=$((n + 1))
  srcs=$(sed -n 's/^ \* sources: //p' "$t")
  [ -n "$srcs" ] || srcs="src/xmodem/xmodem.c src/stream/stream.c src/util/err.c src/util/wait.c src/util/buf.c"
  # shellcheck disable=SC2086
  if ! clang -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -Isrc -o "$out/$name" "$t" $srcs -lm 2>"$out/$name.build.log"; then
    echo "not ok $n - $name builds"; sed 's/^/#   /' "$out/$name.build.log" | head -20; continue
  fi
  corpus=tests/fuzz/corpus/${name%%_*}
  work="$out/$name.corpus"; mkdir -p "$work"
  if "$out/$name" -max_total_time="$secs" -max_len=4096 -timeout=5 -rss_limit_mb=1024 \
      -artifact_prefix="$out/$name-" "$work" "$corpus" >"$out/$name.log" 2>&1; then
    echo "ok $n - $name: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$out/$name.log" || tail -1 "$out/$name.log") in ${secs}s"
  else
    echo "not ok $n - $name"; grep -A20 'ERROR\|==ERROR' "$out/$name.log" | head -30 | sed 's/^/#   /'
  fi
done
