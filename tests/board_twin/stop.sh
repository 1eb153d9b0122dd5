#!/bin/sh
# Stop a twin started by start.sh: stop.sh STATE_DIR. By its pid file, never by name.
set -eu
state=${1:?usage: stop.sh STATE_DIR}
[ -f "$state/pid" ] || exit 0
pid=$(cat "$state/pid")
kill "$pid" 2>/dev/null || true
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
kill -KILL "$pid" 2>/dev/null || true
rm -f "$state/pid" "$state/monitor"
