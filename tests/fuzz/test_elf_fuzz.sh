#!/bin/sh
# Bounded libFuzzer run of the ELF reader (tests/fuzz/elf_fuzz.c), seeded with real ELF files.
top=${ODP_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${ODP_BUILD_DIR:-$top/build}
cd "$top" || exit 1
if make -s BUILD="$build" "$build/fuzz/elf_fuzz" >/dev/null 2>"$build/elf_fuzz.build.log"; then
  echo "ok 1 - elf_fuzz builds"
else
  echo "not ok 1 - elf_fuzz builds"; sed 's/^/#   /' "$build/elf_fuzz.build.log"; exit 1
fi
corpus=$(mktemp -d /tmp/odp-elf-corpus.XXXXXX)
trap 'rm -rf "$corpus"' EXIT
for f in /bin/true "$build/odp-rusage-x86_64" "$build/odp-rusage-aarch64" tests/fixtures/elf/*; do
  [ -f "$f" ] && head -c 65536 "$f" >"$corpus/$(basename "$f")"
done
if "$build/fuzz/elf_fuzz" -max_total_time="${ODP_FUZZ_SECONDS:-10}" -max_len=65536 -rss_limit_mb=1024 \
    -print_final_stats=1 "$corpus" >"$build/elf_fuzz.log" 2>&1; then
  echo "ok 2 - elf_fuzz ran $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/elf_fuzz.log" | grep -o '[0-9]*$') inputs without a crash"
else
  echo "not ok 2 - elf_fuzz found a crash"; tail -30 "$build/elf_fuzz.log" | sed 's/^/#   /'; exit 1
fi
