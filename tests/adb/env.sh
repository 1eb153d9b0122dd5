# Sourced by the adb suites (tests/adb/test_*.sh): where odp and the test programs are, the adb device emulator
# built (tests/adbemu), and the TAP helpers (tests/lib/tap.sh). Sets here, top, ODP, out and ODP_PATH.
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
ODP=${ODP:-$top/build/odp}
out=${ODP_BUILD_DIR:-$top/build}/tests
make -s -C "$top/tests/adbemu" OUT="$out" >/dev/null || { echo "not ok 1 - building adbemu"; echo 1..1; exit 1; }
export ODP_PATH="$top/tests/lib${ODP_PATH:+:$ODP_PATH}"
. "$top/tests/lib/tap.sh"
