#!/bin/sh
# Pushed as --runner by tests/adb/pipeline.lua: the test runner program (tests/c/fake_runner.c, copied onto the
# emulated device), kept going 0.8 s more, with the board's clock (ns) on stderr as it starts
# and as it ends: the gap between one point's end and the next one's start is the board's wait between points.
echo "board-clock start $(date +%s%N)" >&2
/data/local/tmp/bin/fake_runner "$@"
rc=$?
sleep 0.8
echo "board-clock end $(date +%s%N)" >&2
exit "$rc"
