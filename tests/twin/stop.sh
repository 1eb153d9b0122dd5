#!/bin/sh
# Stop the twin started by launch.sh: stop.sh STATE_DIR. Kills by pid, removes the shared DDR file.
set -u
if [ $# -ne 1 ]; then echo "usage: $0 STATE_DIR" >&2; exit 2; fi
state=$1
if [ -f "$state/pid" ]; then
	pid=$(cat "$state/pid")
	# Only a QEMU we started: the pid file is ours and the process must still be qemu.
	if kill -0 "$pid" 2>/dev/null && grep -q qemu "/proc/$pid/comm" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	fi
	rm -f "$state/pid"
fi
if [ -f "$state/shm" ]; then
	case $(cat "$state/shm") in
		/dev/shm/odp-twin-*) rm -f "$(cat "$state/shm")" ;;
	esac
	rm -f "$state/shm"
fi
exit 0
