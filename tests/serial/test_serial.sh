#!/bin/sh
# odp.serial and stream expect/lines on a socat pty pair (the termios path; libserialport cannot open ptys).
set -u
ODP=${ODP:-build/odp}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
socat pty,raw,echo=0,link="$tmp/a" pty,raw,echo=0,link="$tmp/b" 2>/dev/null & sp=$!
trap 'kill $sp 2>/dev/null; wait $sp 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
i=0; while [ ! -e "$tmp/b" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
. "$here/../lib/tap.sh"
tap_run env PORT_A="$tmp/a" PORT_B="$tmp/b" "$ODP" run "$here/serial_pair.lua"
tap_done
