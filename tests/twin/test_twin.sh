#!/bin/sh
# Self-check of the twin board without odp: builds the firmware and host helpers, boots each mode in QEMU
# and checks the contract of tests/twin/README.md. Prints TAP whose every check is marked "# rig" (a check of
# the test rig, not of odp: tests/run.sh counts them apart); exits 1 on any failure.
#   tests/twin/test_twin.sh [WORK_DIR]      (default build/twin-test)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
W=${1:-$root/build/twin-test}
mkdir -p "$W"
W=$(cd "$W" && pwd)
. "$root/tests/lib/tap.sh"
states=""
cleanup() { for s in $states; do "$here/stop.sh" "$s"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM
ok() { tap_ok "$1 # rig"; }
notok() { tap_not_ok "$1 # rig"; }
check() { d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; fi; }
quietly() { q_log=$1; shift; "$@" >"$q_log" 2>&1; } # quietly LOG CMD...: CMD's output to LOG, not to the TAP
need() { command -v "$1" >/dev/null 2>&1 || { notok "tool $1 present (vendor/install-deps.sh installs it)"; tap_done; exit 1; }; }
for t in cmake make arm-none-eabi-gcc qemu-system-arm cc sx socat ss gzip base64 lua5.4; do need "$t"; done
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
crc32_of() { gzip -c "$1" | tail -c8 | od -An -tx4 -N4 | tr -d ' \n'; }
launch() { # launch [-S] IMAGE NAME -> state dir in $S
	S=$W/state-$2${3:-}
	[ "$1" = "-S" ] && { S=$W/state-$3; "$here/launch.sh" -S "$2" "$S"; r=$?; } || { "$here/launch.sh" "$1" "$S"; r=$?; }
	states="$states $S"
	return $r
}
R=$W/rttcat

# ---- build
fix=$root/tests/fixtures
model=$fix/pte/mnist_ethos_u55.pte
etdump=$fix/etdump/docs_tutorial.etdp
head -c 1000 /dev/urandom >"$W/output.bin"
N=7
check "cmake configure (TWIN_INFERENCES=$N, output.bin)" quietly "$W/cmake.log" cmake -S "$here" -B "$W/fw" \
	-DTWIN_MODE=runner -DTWIN_MODEL_PATH="$model" -DTWIN_ETDUMP_PATH="$etdump" -DTWIN_OUTPUT_PATH="$W/output.bin" \
	-DTWIN_INFERENCES=$N -DTWIN_STREAM_BYTES=2097152
check "firmware builds (make mlek_executorch_inference_runner)" quietly "$W/make.log" \
	make -C "$W/fw" -j2 mlek_executorch_inference_runner
check "mram.bin is the runner ELF, ext_flash.bin the model" sh -c \
	"cmp -s '$W/fw/bin/sectors/executorch_inference_runner/mram.bin' '$W/fw/twin_runner.elf' && \
	 cmp -s '$W/fw/bin/sectors/executorch_inference_runner/ext_flash.bin' '$model'"
cflags="-std=c11 -Wall -Wextra -Werror -O2"
check "host tools build (rttcat, libjlinkarm.so, test_jlink)" sh -c \
	"cc $cflags -o '$R' '$here/rttcat.c' && \
	 cc $cflags -shared -fPIC -fvisibility=hidden -o '$W/libjlinkarm.so' '$here/jlinkarm_twin.c' && \
	 cc $cflags -o '$W/test_jlink' '$here/test_jlink.c' -ldl"
[ "$tap_failed" -eq 0 ] || { tap_done; exit 1; }

# ---- runner
t0=$(now)
check "launch runner" launch "$W/fw/twin_runner.elf" runner
"$R" -s "$S" up -u "odp-twin runner v1 boot 1" -t 10 >"$W/runner.log"
rc=$?
t1=$(now)
check "runner banner (launch -> banner $(elapsed "$t0" "$t1") s)" [ $rc -eq 0 ]
"$R" -s "$S" up -u "odp-twin done" -t 20 >>"$W/runner.log"
check "runner reaches 'odp-twin done'" [ $? -eq 0 ]
n=$(grep -c '^Inference: [0-9]*\.[0-9][0-9][0-9] ms$' "$W/runner.log")
check "exactly $N 'Inference: X.XXX ms' lines (got $n)" [ "$n" -eq $N ]
distinct=$(grep '^Inference:' "$W/runner.log" | sort -u | wc -l)
check "inference times are not constant ($distinct distinct)" [ "$distinct" -gt 1 ]
size=$(wc -c <"$model" | tr -d ' ')
check "model line: size and zlib CRC-32 of the embedded .pte" \
	grep -q "^model: $size bytes crc32 $(crc32_of "$model") id ET12$" "$W/runner.log"
check "PMU lines (Inference runtime, ethosu_pmu_cycle_cntr, cntr0..6)" sh -c \
	"grep -q 'Inference runtime: [0-9]* CPU cycles total ([0-9.]* per inference)' '$W/runner.log' && \
	 grep -q 'ethosu_pmu_cycle_cntr : [0-9]*' '$W/runner.log' && \
	 [ \$(grep -c 'ethosu_pmu_cntr[0-6] : [0-9]*' '$W/runner.log') -eq 7 ]"
esize=$(wc -c <"$etdump" | tr -d ' ')
check "[base64] buffer size: $esize" grep -q "^\[base64\] buffer size: $esize$" "$W/runner.log"
sed -n '/^#\[RUN THIS\]$/,/^#\[END\]$/p' "$W/runner.log" | sed -n 's/^echo "\(.*\)" | base64 -d >etdump.bin$/\1/p' |
	base64 -d >"$W/etdump.bin" 2>/dev/null
check "#[RUN THIS] block decodes byte-identical to the ETDump fixture" cmp -s "$W/etdump.bin" "$etdump"
sed -n '/^begin output.bin$/,/^end$/p' "$W/runner.log" | sed '1d;$d' | base64 -d >"$W/output.dec" 2>/dev/null
check "begin output.bin block decodes byte-identical" cmp -s "$W/output.dec" "$W/output.bin"

# ---- reset: the stale ID survives while halted, the firmware re-initialises on run
"$R" -s "$S" qmp stop >/dev/null && "$R" -s "$S" qmp system_reset >/dev/null
info=$("$R" -s "$S" info)
check "after system_reset (halted) the old ID is still there, boot_count 1 ($info)" \
	[ "$info" = "id_valid 1 boot_count 1 mode 0 state 2" ]
"$R" -s "$S" clear-id
t0=$(now)
"$R" -s "$S" qmp cont >/dev/null
"$R" -s "$S" up -u "odp-twin runner v1 boot 2" -t 10 >/dev/null
rc=$?
t1=$(now)
check "cont -> the firmware rewrites the ID and prints boot 2 ($(elapsed "$t0" "$t1") s)" [ $rc -eq 0 ]
"$R" -s "$S" up -u "odp-twin done" -t 20 >"$W/runner2.log"
n=$(grep -c '^Inference: ' "$W/runner2.log")
check "second boot prints its $N Inference lines again (got $n)" [ "$n" -eq $N ]
t0=$(now)
"$R" -s "$S" qmp system_reset >/dev/null
"$R" -s "$S" up -u "odp-twin runner v1 boot 3" -t 10 >/dev/null
rc=$?
check "system_reset while running, without clearing the ID: boot 3 seen ($(elapsed "$t0" "$(now)") s)" [ $rc -eq 0 ]

# ---- test-only J-Link DLL over the same twin
"$R" -s "$S" up -u "odp-twin done" -t 20 >/dev/null
ODP_TWIN_STATE=$S "$W/test_jlink" "$W/libjlinkarm.so" $N >"$W/jlink.log" 2>&1
rc=$?
# its "ok - jlink: ..." lines become checks of this stream; the rest, diagnostics
while IFS= read -r l; do
	case $l in "ok - "*) ok "${l#ok - }" ;; "not ok - "*) notok "${l#not ok - }" ;; *) echo "#   $l" ;; esac
done <"$W/jlink.log"
check "test_jlink (dlopen of the test libjlinkarm.so)" [ $rc -eq 0 ]
"$here/stop.sh" "$S"

# ---- flasher: lrzsz sx -> rttcat pipe -> RTT down channel
pad128() { # pad128 IN OUT: XMODEM 0x1A padding to a multiple of 128 (sx sends 128-byte tail blocks)
	cp "$1" "$2"
	s=$(wc -c <"$1")
	p=$(((128 - s % 128) % 128))
	head -c "$p" /dev/zero | tr '\0' '\032' >>"$2"
}
head -c 300001 /dev/urandom >"$W/xfer.bin"
pad128 "$W/xfer.bin" "$W/xfer.pad"
check "launch flasher" launch "$W/fw/twin_flasher.elf" flasher
"$R" -s "$S" up -u "Starting xmodemReceive..." -t 10 >"$W/flasher.log"
check "flasher prints 'Starting xmodemReceive...'" [ $? -eq 0 ]
xfer() { # xfer SX_OPTS LABEL
	: >"$W/pipe.log"
	t0=$(now)
	timeout 60 socat EXEC:"sx $1 $W/xfer.bin",pipes EXEC:"$R -s $S pipe -t 0.3 -l $W/pipe.log",pipes 2>"$W/sx.log"
	rc=$?
	t1=$(now)
	grep -q -a "odp-twin done" "$W/pipe.log" || "$R" -s "$S" up -u "odp-twin done" -t 5 >>"$W/pipe.log"
	padsz=$(wc -c <"$W/xfer.pad" | tr -d ' ')
	kbs=$(awk -v n="$padsz" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / 1024 / (b - a) }')
	check "$2: sx exits 0 ($kbs KB/s incl. start/stop)" [ $rc -eq 0 ]
	check "$2: 'Success, $padsz bytes received.'" grep -q -a "Success, $padsz bytes received\." "$W/pipe.log"
	check "$2: CRC32 equals zlib's of the padded file" grep -q -a "CRC32: $(crc32_of "$W/xfer.pad")" "$W/pipe.log"
}
xfer "-k" "XMODEM-1K/CRC"
"$R" -s "$S" qmp system_reset >/dev/null
"$R" -s "$S" up -u "Starting xmodemReceive..." -t 10 >/dev/null
check "flasher restarts after system_reset" [ $? -eq 0 ]
xfer "" "XMODEM-128/CRC"
"$R" -s "$S" qmp system_reset >/dev/null
"$R" -s "$S" up -u "Starting xmodemReceive..." -t 10 >/dev/null
printf '\030\030' >"$W/can.bin"
"$R" -s "$S" pipe -t 0.3 -l "$W/can.log" <"$W/can.bin" >/dev/null
grep -q -a "odp-twin done" "$W/can.log" || "$R" -s "$S" up -u "odp-twin done" -t 5 >>"$W/can.log"
check "CAN CAN from the sender -> 'Failed = -1'" grep -q -a "Failed = -1" "$W/can.log"
"$here/stop.sh" "$S"

# ---- flasher with the 'C' phase cut to 1 try: the NAK/checksum fallback, and sx -k's 1028-byte checksum frames
check "flasher with TWIN_XMODEM_C_TRIES=1 builds" sh -c "cmake -S '$here' -B '$W/fw-nak' -DTWIN_XMODEM_C_TRIES=1 -DTWIN_MODEL_PATH='$model' \
	>'$W/cmake-nak.log' 2>&1 && make -C '$W/fw-nak' -j2 twin_flasher >'$W/make-nak.log' 2>&1"
check "launch flasher (checksum fallback)" launch "$W/fw-nak/twin_flasher.elf" flasher-nak
"$R" -s "$S" up -u "Starting xmodemReceive...
C" -t 10 >/dev/null
"$R" -s "$S" up -n 1 -t 5 >"$W/nak.log"
check "after the 'C' tries the flasher sends NAK" [ "$(od -An -tx1 "$W/nak.log" | tr -d ' ')" = "15" ]
xfer "-k" "XMODEM-1K/checksum (1028-byte frames)"
"$here/stop.sh" "$S"

# ---- fault injection for the flow's failure paths
fault() { # fault NAME -> builds the runner with TWIN_FAULT=NAME into $W/fw-NAME
	cmake -S "$here" -B "$W/fw-$1" -DTWIN_FAULT="$1" -DTWIN_MODEL_PATH="$model" -DTWIN_INFERENCES=3 >"$W/cmake-$1.log" 2>&1 &&
		make -C "$W/fw-$1" -j2 twin_runner >"$W/make-$1.log" 2>&1
}
check "TWIN_FAULT=corrupt_base64 builds" fault corrupt_base64
launch "$W/fw-corrupt_base64/twin_runner.elf" corrupt
"$R" -s "$S" up -u "odp-twin done" -t 20 >"$W/corrupt.log"
line=$(sed -n 's/^echo "\(.*\)" | base64 -d >etdump.bin$/\1/p' "$W/corrupt.log")
check "corrupt_base64: the block is framed but does not decode" sh -c \
	"[ -n '$line' ] && ! echo '$line' | base64 -d >/dev/null 2>&1"
"$here/stop.sh" "$S"
check "TWIN_FAULT=no_rtt builds" fault no_rtt
launch "$W/fw-no_rtt/twin_runner.elf" nortt
"$R" -s "$S" wait-id -t 1.5
check "no_rtt: no RTT ID appears" [ $? -ne 0 ]
"$here/stop.sh" "$S"

# ---- stream: 2 MiB of 32-byte lines, no loss
check "launch stream" launch "$W/fw/twin_stream.elf" stream
"$R" -s "$S" up -u "stream: 2097152 bytes
" -t 10 >/dev/null
t0=$(now)
"$R" -s "$S" up -u "odp-twin done" -t 60 >"$W/stream.log"
rc=$?
t1=$(now)
lines=$(grep -c -v 'odp-twin done' "$W/stream.log")
bad=$(grep -v 'odp-twin done' "$W/stream.log" | awk -v a="abcdefghijklmnopqrstuv" '
	{ want = sprintf("%08x", NR - 1); r = (NR - 1) % 22
	  if ($1 != want || $2 != substr(a, r + 1) substr(a, 1, r) || length($0) != 31) bad++ }
	END { print bad + 0 }')
mbs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", 2097152 / 1048576 / (b - a) }')
check "stream: 65536 lines in order, none lost or corrupt (got $lines, bad $bad; $mbs MB/s via rttcat)" \
	[ $rc -eq 0 ] && [ "$lines" -eq 65536 ] && [ "$bad" -eq 0 ]
"$here/stop.sh" "$S"

# ---- SETOOLS stand-ins: gen-toc + write-mram relaunch the twin halted; a probe reset+go boots it
if [ -x "$here/setools/app-gen-toc" ]; then
	ST=$W/setools
	rm -rf "$ST" && mkdir -p "$ST/build/images" && cp -r "$here/setools/build/config" "$ST/build/"
	cp "$W/fw/bin/flasher.bin" "$ST/build/images/flasher_he.bin"
	S=$W/state-setools
	states="$states $S"
	(cd "$ST" && ODP_TWIN_STATE=$S "$here/setools/app-gen-toc" -f build/config/flasher-cfg.json >"$W/toc.log" 2>&1)
	check "app-gen-toc -f build/config/flasher-cfg.json writes build/AppTocPackage.bin" \
		[ -s "$ST/build/AppTocPackage.bin" ]
	(cd "$ST" && ODP_TWIN_STATE=$S "$here/setools/app-write-mram" -p >>"$W/toc.log" 2>&1)
	check "app-write-mram -p launches the twin" [ -f "$S/pid" ]
	st=$("$R" -s "$S" qmp query-status)
	case $st in *'"running": false'*) r=0 ;; *) r=1 ;; esac
	check "the core stays halted after app-write-mram (no reset, like the real tool)" [ $r -eq 0 ]
	check "RTT stays silent before the SWD reset" sh -c "! '$R' -s '$S' up -n 1 -t 0.5 >/dev/null 2>&1"
	info=$("$R" -s "$S" info)
	check "write-mram #2 will carry the RTT area; #1 had none to carry ($info)" [ "$info" = "id_valid 0 boot_count 0 mode 0 state 0" ]
	"$R" -s "$S" qmp stop >/dev/null && "$R" -s "$S" qmp system_reset >/dev/null && "$R" -s "$S" qmp cont >/dev/null
	"$R" -s "$S" up -u "Starting xmodemReceive..." -t 10 >/dev/null
	check "SWD reset + go boots the flasher image" [ $? -eq 0 ]
	cp "$W/fw/bin/sectors/executorch_inference_runner/mram.bin" "$ST/build/images/mram.bin"
	(cd "$ST" && ODP_TWIN_STATE=$S "$here/setools/app-gen-toc" -f build/config/asr.json >>"$W/toc.log" 2>&1 &&
		ODP_TWIN_STATE=$S "$here/setools/app-write-mram" -p >>"$W/toc.log" 2>&1)
	check "asr.json + write-mram relaunches with mram.bin" grep -q "mram.bin" "$S/image"
	info=$("$R" -s "$S" info)
	check "the flasher's stale RTT block survives 'flashing' ($info)" [ "$info" = "id_valid 1 boot_count 1 mode 1 state 1" ]
	"$R" -s "$S" up -t 0.5 >"$W/stale.log" 2>/dev/null
	check "... holding only the flasher's leftovers: the runner is silent until the reset" \
		sh -c "! grep -q -a 'odp-twin runner' '$W/stale.log'"
	"$R" -s "$S" qmp stop >/dev/null && "$R" -s "$S" qmp system_reset >/dev/null && "$R" -s "$S" qmp cont >/dev/null
	"$R" -s "$S" up -u "odp-twin done" -t 20 >"$W/setools-run.log"
	n=$(grep -c '^Inference: ' "$W/setools-run.log")
	check "after reset the runner from mram.bin prints $N Inference lines (got $n)" [ "$n" -eq $N ]
	"$here/stop.sh" "$S"
else
	notok "setools stand-ins present"
fi

ls /dev/shm | grep -q "^odp-twin-$$-" && notok "shm files left behind"
tap_done
