#!/bin/sh
# Pushed as --runner by tests/adb/flow.lua: behaves like ExecuTorch's Android build of executor_runner,
# which logs to logcat (tag ExecuTorch, bare messages) and prints only tensors on stdout. It runs the test
# runner program (tests/c/fake_runner.c) the test copied onto the emulated device and moves its log lines
# into the emulator's logcat stand-in (tests/adbemu/system/bin/log).
export ODP_FAKE_ETDUMP=/data/local/tmp/fixtures/add_n10.etdump
st=/data/local/tmp/.runner_status.$$
{ { /data/local/tmp/bin/fake_runner "$@" 2>&1 1>&3 3>&-; echo $? >"$st"; } |
    sed -e 's/^[DIEF] [0-9:.]* *executorch:[^]]*] //' | log -t ExecuTorch; } 3>&1
rc=$(cat "$st"); rm -f "$st"
exit "$rc"
