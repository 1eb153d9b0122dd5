#!/bin/sh
# Bounded libFuzzer runs of the adb protocol core: the message/banner parser, the shell v2 demuxer and the sync
# decoder (adb_proto_fuzz), and a whole connection fed by a hostile device (adb_conn_fuzz).
# ODP_FUZZ_SECONDS (default 10) per target. Needs clang + libclang-rt (vendor/packages.txt [test]).
top=${ODP_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${ODP_BUILD_DIR:-$top/build}
cd "$top" || exit 1
mkdir -p "$build/fuzz"
flags="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc"
core="src/adb/proto.c src/adb/conn.c src/adb/auth.c src/util/err.c src/util/wait.c src/util/fs.c src/util/buf.c"
n=0 fails=0
for t in adb_proto_fuzz adb_conn_fuzz; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  if clang $flags -o "$build/fuzz/$t" "tests/fuzz/$t.c" $core -lcrypto >"$build/fuzz/$t.build.log" 2>&1; then
    echo "ok $n - $t builds"
  else
    echo "not ok $n - $t builds"; sed 's/^/#   /' "$build/fuzz/$t.build.log"; fails=$((fails + 1)); continue
  fi
  corpus=$(mktemp -d /tmp/odp-adb-corpus.XXXXXX)
  # seeds: a CNXN banner, shell v2 packets, sync records
  printf '\000\000device::ro.product.model=X;features=shell_v2,stat_v2' >"$corpus/banner"
  printf '\001\003\001\003\000\000\000out\002\003\000\000\000err\003\001\000\000\000\003' >"$corpus/shell"
  printf '\002\007DATA\005\000\000\000helloDONE\000\000\000\000FAIL\002\000\000\000no' >"$corpus/sync"
  n=$((n + 1))
  if "$build/fuzz/$t" -max_total_time="${ODP_FUZZ_SECONDS:-10}" -max_len=8192 -rss_limit_mb=1024 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$build/fuzz/$t-" "$corpus" >"$build/fuzz/$t.log" 2>&1; then
    echo "ok $n - $t ran $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz/$t.log" | grep -o '[0-9]*$') inputs without a crash"
  else
    echo "not ok $n - $t found a crash"; tail -30 "$build/fuzz/$t.log" | sed 's/^/#   /'; fails=$((fails + 1))
  fi
  rm -rf "$corpus"
done
[ "$fails" = 0 ]
