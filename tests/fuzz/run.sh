#!/bin/sh
# Builds every libFuzzer target tests/fuzz/*_fuzz.c (clang, ASan + UBSan) and runs each for a bounded time:
#   tests/fuzz/run.sh [SECONDS]      (default ODP_FUZZ_SECONDS or 10)
# A target's header comment declares what it needs, one line each:
#    * sources: the C files of the core it exercises (no Lua: C cores have plain C APIs)
#    * seeds: files or directories of real inputs to start from (missing ones are ignored)
#    * max_len: the largest input to try
# Prints TAP (lines and plan). A failure leaves its reproducer and log in tests/.tmp/fuzz/.
set -u
cd "$(dirname "$0")/../.." || exit 1
secs=${1:-${ODP_FUZZ_SECONDS:-10}}
out=tests/.tmp/fuzz
mkdir -p "$out"
n=0
for t in tests/fuzz/*_fuzz.c; do
  name=$(basename "$t" .c)
  srcs=$(sed -n 's/^ \* sources: //p' "$t")
  seeds=$(sed -n 's/^ \* seeds: //p' "$t")
  maxlen=$(sed -n 's/^ \* max_len: \([0-9]*\).*/\1/p' "$t")
  n=$((n + 1))
  if [ -z "$srcs" ]; then echo "not ok $n - $name declares no ' * sources:' line"; continue; fi
  # shellcheck disable=SC2086
  if ! clang -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -Isrc -o "$out/$name" "$t" $srcs -lm -lcrypto 2>"$out/$name.build.log"; then
    echo "not ok $n - $name builds"; sed 's/^/#   /' "$out/$name.build.log" | head -20; continue
  fi
  work="$out/$name.corpus"
  rm -rf "$work" && mkdir -p "$work"
  for s in $seeds; do
    for f in $( [ -d "$s" ] && ls -d "$s"/* || echo "$s"); do
      [ -f "$f" ] && head -c "${maxlen:-4096}" "$f" >"$work/$(echo "$f" | tr '/' '_')"
    done
  done
  # -timeout: no single input may take seconds; -rss_limit_mb: every size is bounded
  if "$out/$name" -max_total_time="$secs" -max_len="${maxlen:-4096}" -timeout=5 -rss_limit_mb=1024 \
      -print_final_stats=1 -artifact_prefix="$out/$name-" "$work" >"$out/$name.log" 2>&1; then
    echo "ok $n - $name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$name.log" | grep -o '[0-9]*$') inputs in ${secs}s, no crash, leak or undefined behaviour"
  else
    echo "not ok $n - $name"; grep -A20 'ERROR\|runtime error' "$out/$name.log" | head -30 | sed 's/^/#   /'
  fi
done
echo "1..$n"
