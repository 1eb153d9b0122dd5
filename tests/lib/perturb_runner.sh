#!/bin/sh
# A runner that is wrong on purpose, for tests/lua/outputs_test.lua: runs $ODP_REAL_RUNNER with the arguments
# it was given, then spoils output 0 (BASE-0.bin of its --output_file BASE) as $PERTURB says:
#   add:I:D     element I (float32) += D, rounded to float32 as the runner's own arithmetic would be
#   set:I:V     element I := V (nan, inf, -inf or a number)
#   delete      no output file at all
#   truncate    the file cut by 4 bytes
set -u
"$ODP_REAL_RUNNER" "$@" || exit $?
base=
prev=
for a in "$@"; do
	[ "$prev" = "--output_file" ] && base=$a
	prev=$a
done
[ -n "$base" ] || exit 0
exec /usr/bin/python3 - "$base-0.bin" "$PERTURB" <<'PY'
import os, sys, numpy as np
path, how = sys.argv[1], sys.argv[2].split(":")
if how[0] == "delete":
    os.unlink(path)
elif how[0] == "truncate":
    os.truncate(path, os.path.getsize(path) - 4)
else:
    a = np.fromfile(path, "<f4")
    i = int(how[1])
    a[i] = a[i] + np.float32(how[2]) if how[0] == "add" else np.float32(float(how[2]))
    a.tofile(path)
PY
