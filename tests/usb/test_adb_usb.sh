#!/bin/sh
# The libusb adb transport against a umockdev-emulated device (tests/usb/adb_usb_umockdev.c).
# Needs libumockdev-dev and umockdev (vendor/packages.txt [test]); this machine has no USB core, so umockdev's
# mocked sysfs + usbdevfs ioctls are the honest ceiling (docs/sources.md §3).
top=${ODP_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${ODP_BUILD_DIR:-$top/build}
cd "$top" || exit 1
mkdir -p "$build/tests"
prog=$build/tests/adb_usb_umockdev
# shellcheck disable=SC2046
if ! cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Isrc -o "$prog" tests/usb/adb_usb_umockdev.c \
    src/usb/usb.c src/adb/usb.c src/adb/conn.c src/adb/services.c src/adb/proto.c src/adb/auth.c src/util/err.c src/util/wait.c src/util/fiber.c src/util/fs.c src/util/buf.c \
    $(pkg-config --cflags --libs umockdev-1.0 libusb-1.0 libcrypto) -lpthread >"$build/tests/adb_usb_umockdev.build.log" 2>&1; then
  echo "not ok 1 - adb_usb_umockdev builds"; sed 's/^/#   /' "$build/tests/adb_usb_umockdev.build.log"; exit 1
fi
exec timeout 60 umockdev-wrapper "$prog"
