#!/bin/sh
# Start an arm64 board twin: start.sh rpi5|graviton STATE_DIR [BUILD_DIR]  (tests/board_twin/README.md)
# Boots build.sh's guest under qemu-system-aarch64 -M virt (TCG), SSH forwarded from a free port on
# 127.0.0.1, and returns once the guest's dropbear listens. STATE_DIR then holds:
#   pid, port, user, identity, known_hosts (the "[127.0.0.1]:PORT ssh-ed25519 ..." line), monitor (QEMU's
#   monitor socket: `system_reset`, `quit`), console.log, and env (the above as shell assignments).
# stop.sh STATE_DIR stops it. With ODP_TWIN_OWNER_PID set (tests do), the twin is also stopped once that
# process is gone, so a test killed by its timeout leaves no QEMU behind.
set -eu
if [ $# -lt 2 ]; then echo "usage: $0 rpi5|graviton STATE_DIR [BUILD_DIR]" >&2; exit 2; fi
kind=$1 state=$2
here=$(cd "$(dirname "$0")" && pwd)
build=${3:-$here/../../build/board_twin}
# A Raspberry Pi 5: four Cortex-A76 (2 on a 2-core host: TCG runs a vCPU per host thread and 4 boot slower).
# A Graviton instance: Neoverse-N1 (Graviton2's core; QEMU 7.2 has no Neoverse-V2 for a Graviton4).
ncpu=$(nproc)
case $kind in
	rpi5) cpu=cortex-a76 user=pi hostname=raspberrypi smp=$([ "$ncpu" -ge 4 ] && echo 4 || echo 2) ;;
	graviton) cpu=neoverse-n1 user=ubuntu hostname=ip-172-31-0-1 smp=2 ;;
	*) echo "$0: unknown twin '$kind' (rpi5 or graviton)" >&2; exit 2 ;;
esac
smp=${ODP_TWIN_SMP:-$smp}
"$here/build.sh" "$build"
build=$(cd "$build" && pwd)
mkdir -p "$state"
state=$(cd "$state" && pwd)
if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
	echo "$0: a twin is already running from $state (pid $(cat "$state/pid")); run stop.sh first" >&2
	exit 1
fi
port_free() { ! ss -Htln "sport = :$1" | grep -q .; }
tries=0
while :; do
	tries=$((tries + 1))
	port=$(shuf -i 20000-60999 -n 1)
	port_free "$port" || continue
	rm -f "$state/pid" "$state/monitor"
	: >"$state/console.log"
	# 512 MB: the root (~70 MB) lives in it with room for the runner; more is more for the kernel to set up
	if qemu-system-aarch64 -M virt -cpu "$cpu" -smp "$smp" -m 512 \
		-kernel "$build/Image" -initrd "$build/initramfs.cpio" \
		-append "console=ttyAMA0 quiet odp.hostname=$hostname" \
		-netdev user,id=net0,hostfwd=tcp:127.0.0.1:"$port"-:22 -device virtio-net-device,netdev=net0 \
		-display none -serial file:"$state/console.log" -monitor unix:"$state/monitor",server=on,wait=off \
		-name "odp-board-twin-$kind" -daemonize -pidfile "$state/pid" 2>"$state/qemu.log"; then
		break
	fi
	if [ $tries -ge 5 ] || ! grep -q -i "could not set up host forwarding\|address already in use" "$state/qemu.log"; then
		echo "$0: QEMU failed:" >&2
		cat "$state/qemu.log" >&2
		exit 1
	fi
done
cp "$build/id_ed25519" "$state/identity"
chmod 600 "$state/identity"
echo "[127.0.0.1]:$port $(cat "$build/host_ed25519.pub")" >"$state/known_hosts"
echo "$port" >"$state/port"
echo "$user" >"$state/user"
cat >"$state/env" <<ENV
ODP_TWIN_PORT=$port
ODP_TWIN_USER=$user
ODP_TWIN_IDENTITY=$state/identity
ODP_TWIN_KNOWN_HOSTS=$state/known_hosts
ENV
if [ -n "${ODP_TWIN_OWNER_PID:-}" ]; then
	qpid=$(cat "$state/pid")
	(while kill -0 "$ODP_TWIN_OWNER_PID" 2>/dev/null && kill -0 "$qpid" 2>/dev/null; do sleep 2; done
	 [ "$(cat "$state/pid" 2>/dev/null)" = "$qpid" ] && "$here/stop.sh" "$state") >/dev/null 2>&1 </dev/null &
fi
# Ready when the init says so (after dropbear started), bounded: a TCG boot takes seconds, 120 s is a hung guest.
i=0
until grep -q '^odp-twin: ready' "$state/console.log"; do
	i=$((i + 1))
	if [ $i -gt 1200 ] || ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
		echo "$0: the $kind twin did not come up; console:" >&2
		tail -n 20 "$state/console.log" >&2
		"$here/stop.sh" "$state"
		exit 1
	fi
	sleep 0.1
done
