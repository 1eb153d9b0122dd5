#!/bin/sh
# Start the twin board: launch.sh [-S] IMAGE.elf STATE_DIR  (tests/twin/README.md, "Launch and stop").
# -S starts the core halted (QMP `cont` runs it). Returns once QMP and the gdbstub listen.
set -eu
halt=""
if [ "${1:-}" = "-S" ]; then halt="-S"; shift; fi
if [ $# -ne 2 ]; then echo "usage: $0 [-S] IMAGE.elf STATE_DIR" >&2; exit 2; fi
image=$1 state=$2
[ -f "$image" ] || { echo "$0: no such image: $image" >&2; exit 1; }
case $(od -An -c -N4 "$image" | tr -d ' ') in
	177ELF) ;;
	*) echo "$0: $image is not an ELF file (the twin boots ELF images only)" >&2; exit 1 ;;
esac
image=$(cd "$(dirname "$image")" && pwd)/$(basename "$image")
mkdir -p "$state"
state=$(cd "$state" && pwd)
if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
	echo "$0: a twin is already running from $state (pid $(cat "$state/pid")); run stop.sh first" >&2
	exit 1
fi
qemu=${QEMU:-qemu-system-arm}

port_free() { ! ss -Htln "sport = :$1" | grep -q .; }
pick_port() {
	while :; do
		p=$(shuf -i 20000-60999 -n 1)
		port_free "$p" && { echo "$p"; return; }
	done
}

tries=0
while :; do
	tries=$((tries + 1))
	qmp=$(pick_port)
	gdb=$(pick_port)
	[ "$qmp" != "$gdb" ] || continue
	shm=/dev/shm/odp-twin-$$-$(shuf -i 100000-999999 -n 1)
	rm -f "$state/pid"
	# memory-backend-file: DDR (0x60000000, 2 GiB, the only size QEMU accepts for this machine) lives in a
	# sparse shared file the host maps; -daemonize returns after the sockets are bound.
	if "$qemu" -M mps3-an547,memory-backend=ddr -m 2G \
		-object memory-backend-file,id=ddr,size=2G,mem-path="$shm",share=on \
		-qmp tcp:127.0.0.1:"$qmp",server=on,wait=off -gdb tcp:127.0.0.1:"$gdb" \
		-kernel "$image" -display none -serial null -monitor none -name odp-twin $halt \
		-daemonize -pidfile "$state/pid" 2>"$state/qemu.log"; then
		break
	fi
	rm -f "$shm"
	if [ $tries -ge 5 ] || ! grep -q -i "address already in use\|Failed to bind" "$state/qemu.log"; then
		echo "$0: QEMU failed:" >&2
		cat "$state/qemu.log" >&2
		exit 1
	fi
done
echo "$shm" >"$state/shm"
echo 0x60000000 >"$state/ddr_base"
echo 2147483648 >"$state/ddr_size"
echo 0x60000000 >"$state/rtt_addr"
echo "$qmp" >"$state/qmp_port"
echo "$gdb" >"$state/gdb_port"
echo "$image" >"$state/image"
