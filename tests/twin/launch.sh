#!/bin/sh
# Start the twin board: launch.sh [-S] [-l FD] IMAGE.elf STATE_DIR  (tests/twin/README.md, "Launch and stop").
# -S starts the core halted (QMP `cont` runs it). -l FD: FD is the read end of a pipe whose writer is the
# process the twin belongs to (odp's lifeline, odp.proc.run{lifeline=}): when that process ends, however it
# ends, a watcher reads end-of-file and stops the twin (stop.sh), shared DDR file included.
# Returns once QMP and the gdbstub listen. Twins' DDR files that no process maps any more (their owner was
# killed before it could stop them) are removed first.
set -eu
halt="" lifeline=""
while [ $# -gt 0 ]; do
	case $1 in
		-S) halt="-S"; shift ;;
		-l) lifeline=${2:?}; shift 2 ;;
		*) break ;;
	esac
done
case $lifeline in ""|[3-9]|[1-5][0-9]|6[0-3]) ;; *) echo "$0: -l takes a descriptor from 3 to 63" >&2; exit 2 ;; esac
if [ $# -ne 2 ]; then echo "usage: $0 [-S] [-l FD] IMAGE.elf STATE_DIR" >&2; exit 2; fi
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
here=$(cd "$(dirname "$0")" && pwd)

# Stale DDR files: mapped by no process and older than a launch takes (so not one being started now).
for f in /dev/shm/odp-twin-*; do
	[ -f "$f" ] || continue
	[ -n "$(find "$f" -maxdepth 0 -mmin -1 2>/dev/null)" ] && continue
	grep -qsF "$f" /proc/[0-9]*/maps || rm -f "$f"
done

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
if [ -n "$lifeline" ]; then
	# Only the owner holds the lifeline's write end (QEMU and this script hold at most read ends, which do
	# not keep a pipe open), so the watcher's end-of-file means the owner is gone. It knows QEMU's pid and DDR
	# file itself: an owner that removed the state directory first (a test's temporary dir) still stops it.
	setsid sh -c 'cat >/dev/null; exec "$0" "$1" "$2" "$3"' "$here/stop.sh" "$state" "$(cat "$state/pid")" "$shm" \
		<&"$lifeline" >/dev/null 2>&1 &
fi
echo 0x60000000 >"$state/ddr_base"
echo 2147483648 >"$state/ddr_size"
echo 0x60000000 >"$state/rtt_addr"
echo "$qmp" >"$state/qmp_port"
echo "$gdb" >"$state/gdb_port"
echo "$image" >"$state/image"
