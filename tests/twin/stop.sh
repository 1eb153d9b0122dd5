#!/bin/sh
# Stop the twin started by launch.sh: stop.sh STATE_DIR [PID DDR_FILE]. Kills by pid, removes the shared DDR
# file. PID and DDR_FILE (the lifeline watcher's, known at launch) stand in for STATE_DIR's files when those are
# gone: the watcher may run after its owner removed the state directory.
set -u
if [ $# -ne 1 ] && [ $# -ne 3 ]; then echo "usage: $0 STATE_DIR [PID DDR_FILE]" >&2; exit 2; fi
state=$1
pid="" shm=""
if [ -d "$state" ]; then
	[ -f "$state/pid" ] && pid=$(cat "$state/pid")
	[ -f "$state/shm" ] && shm=$(cat "$state/shm")
elif [ $# -eq 3 ]; then
	# only the QEMU mapping that very DDR file (its name is unique): a pid reused since is left alone
	grep -qsF "$3" "/proc/$2/cmdline" && pid=$2
	shm=$3
fi
if [ -n "$pid" ]; then
	# Only a QEMU we started: the pid file is ours and the process must still be qemu.
	if kill -0 "$pid" 2>/dev/null && grep -q qemu "/proc/$pid/comm" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	fi
	rm -f "$state/pid"
fi
case $shm in
	/dev/shm/odp-twin-*) rm -f "$shm" ;;
esac
rm -f "$state/shm"
exit 0
