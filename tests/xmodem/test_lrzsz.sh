#!/bin/sh
# odp.xmodem against lrzsz (sx, rx) over socat pty pairs, both directions, 128/1K, CRC/checksum;
# then odp against odp through a lossy relay (corrupt/drop/duplicate): identical at 1e-3, clean abort at 1e-1.
# rx runs on pipes (docs/sources.md §5: on a pty its final ACK can be flushed away and the sender hangs).
set -u
ODP=${ODP:-build/odp}
BUILD=${ODP_BUILD_DIR:-build}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
. "$here/../lib/tap.sh"
waitfor() { i=0; while [ ! -e "$1" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; }

head -c 100000 /dev/urandom >"$tmp/in.bin"
# what a receiver keeps: the file padded with 0x1A to a multiple of 128
pad=$(( (128 - 100000 % 128) % 128 ))
{ cat "$tmp/in.bin"; head -c "$pad" /dev/zero | tr '\0' '\032'; } >"$tmp/padded.bin"
cd "$tmp" || exit 1

# odp sends, lrzsz rx receives (rx -c asks with `C`, plain rx with NAK)
for mode in 1k 128; do
  for check in crc checksum; do
    c=""; [ "$check" = crc ] && c="-c"
    rm -f rx.bin; link="$tmp/rx-$mode-$check"
    socat pty,raw,echo=0,link="$link" EXEC:"rx -X $c rx.bin",pipes 2>socat.log & sp=$!; pids="$pids $sp"
    waitfor "$link"
    out=$(timeout 60 "$ODP" run "$here/xfer.lua" send "$link" "$tmp/in.bin" mode=$mode 2>&1)
    wait "$sp"; rxrc=$?
    if echo "$out" | grep -q "^ok bytes=100000 .*check=$check" && [ $rxrc -eq 0 ] && cmp -s rx.bin padded.bin; then
      tap_ok "odp send -> lrzsz rx ($mode, $check): $out"
    else
      tap_not_ok "odp send -> lrzsz rx ($mode, $check)" "$out" "rx exit $rxrc" "$(tail -c 300 socat.log)"
    fi
  done
done

# lrzsz sx sends, odp receives (sx -k: 1K blocks, even in checksum mode)
for k in "-k" ""; do
  for check in crc checksum; do
    rm -f out.bin; link="$tmp/sx$k-$check"
    socat pty,raw,echo=0,link="$link" EXEC:"sx -X $k in.bin",pty,raw,echo=0 2>socat.log & sp=$!; pids="$pids $sp"
    waitfor "$link"
    out=$(timeout 60 "$ODP" run "$here/xfer.lua" receive "$link" "$tmp/out.bin" check=$check 2>&1)
    wait "$sp"; sxrc=$?
    if echo "$out" | grep -q "^ok bytes=100096 .*check=$check" && [ $sxrc -eq 0 ] && cmp -s out.bin padded.bin; then
      tap_ok "lrzsz sx $k -> odp receive ($check): $out"
    else
      tap_not_ok "lrzsz sx $k -> odp receive ($check)" "$out" "sx exit $sxrc" "$(tail -c 300 socat.log)"
    fi
  done
done

# the sender never starts: odp's receiver gives up in time and leaves no file
link="$tmp/silent"
socat pty,raw,echo=0,link="$link" EXEC:"sleep 30",pipes 2>/dev/null & sp=$!; pids="$pids $sp"
waitfor "$link"
out=$(timeout 30 "$ODP" run "$here/xfer.lua" receive "$link" "$tmp/none.bin" timeout=0.5 start=2 2>&1)
kill "$sp" 2>/dev/null
if echo "$out" | grep -q "ETIMEDOUT" && [ ! -e none.bin ] && [ -z "$(ls -A | grep part)" ]; then
  tap_ok "receive with no sender: ETIMEDOUT, no file"
else
  tap_not_ok "receive with no sender" "$out" "$(ls -A)"
fi

# lossy channel: odp -> relay -> odp
head -c 32768 /dev/urandom >"$tmp/l.bin"
lossy() { # rate seed mode -> sets lout/lsend
  rm -f lout.bin
  "$BUILD/tests/lossy_relay" "$1" "$2" "$tmp/A" "$tmp/B" >relay.out 2>relay.err & rp=$!; pids="$pids $rp"
  waitfor "$tmp/B"
  timeout 200 "$ODP" run "$here/xfer.lua" receive "$tmp/B" "$tmp/lout.bin" timeout=0.5 retries=20 >recv.out 2>&1 & rxp=$!
  lsend=$(timeout 200 "$ODP" run "$here/xfer.lua" send "$tmp/A" "$tmp/l.bin" mode="$3" timeout=0.5 retries=20 2>&1)
  wait "$rxp"
  lout=$(cat recv.out)
  kill "$rp"; wait "$rp" 2>/dev/null
}
for mode in 128 1k; do
  lossy 0.001 11 "$mode"
  if echo "$lsend" | grep -q '^ok' && echo "$lout" | grep -q '^ok' && cmp -s l.bin lout.bin; then
    tap_ok "lossy 1e-3 ($mode): byte-identical; send: $lsend; $(cat relay.err)"
  else
    tap_not_ok "lossy 1e-3 ($mode)" "send: $lsend" "recv: $lout" "$(cat relay.err)"
  fi
done
lossy 0.1 5 128
if echo "$lsend" | grep -q '^fail' && echo "$lout" | grep -q '^fail' && [ ! -e lout.bin ] && [ -z "$(ls -A | grep part)" ]; then
  tap_ok "lossy 1e-1: both sides abort, no file left ($lsend / $lout)"
else
  tap_not_ok "lossy 1e-1" "send: $lsend" "recv: $lout" "$(ls -A)"
fi
tap_done
