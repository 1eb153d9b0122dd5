#!/bin/sh
# An aarch64 Linux userland on this x86_64 machine through qemu-user, for tests/lua/aarch64_user_test.lua:
#   aarch64_user.sh binfmt          registers qemu-aarch64-static with binfmt_misc (as root), so the kernel runs
#                                   aarch64 programs through it; "already registered" is fine when it is usable
#                                   in a chroot (flag F: the interpreter opened at registration). Prints how.
#   aarch64_user.sh rootfs DIR      builds (once; cached) DIR/root: Debian 12's arm64 busybox-static (the
#                                   shell and the commands a board answers odp with), libc6 and libc-bin
#                                   (glibc, getconf GNU_LIBC_VERSION for preflight) and time (GNU time -v, the
#                                   oracle of peak RSS), fetched with a private apt configuration for arm64:
#                                   this machine's apt is left alone (no foreign architecture added).
# Both need vendor/packages.txt [test]: qemu-user-static, and apt/dpkg-deb (there on Debian).
set -eu
. "$(dirname "$0")/debian_arm64.sh"

binfmt() {
	dir=/proc/sys/fs/binfmt_misc
	[ -e "$dir/register" ] || mount -t binfmt_misc binfmt_misc "$dir" 2>/dev/null ||
		{ echo "binfmt_misc cannot be mounted here (not root, or no CONFIG_BINFMT_MISC)" >&2; return 1; }
	interp=$(command -v qemu-aarch64-static) || { echo "qemu-aarch64-static is missing (qemu-user-static)" >&2; return 1; }
	if [ -e "$dir/qemu-aarch64" ]; then
		grep -q '^enabled' "$dir/qemu-aarch64" || { echo "qemu-aarch64 is registered but disabled" >&2; return 1; }
		grep -q '^flags:.*F' "$dir/qemu-aarch64" ||
			{ echo "qemu-aarch64 is registered without flag F: it cannot run inside a chroot" >&2; return 1; }
		echo "already registered: $(sed -n 's/^interpreter //p' "$dir/qemu-aarch64")"
		return 0
	fi
	# registered as a booted Debian 12 registers it (systemd-binfmt from qemu-user-static's binfmt.d file: the
	# interpreter is /usr/libexec/qemu-binfmt/aarch64-binfmt-P, a link to qemu-aarch64-static), so the suites meet
	# the layout of a fresh machine; without that file, the same entry naming qemu-aarch64-static itself
	line=$(grep -s '^:qemu-aarch64:' /usr/lib/binfmt.d/qemu-aarch64.conf || true)
	case ${line##*:} in # its flags: F (the interpreter opened now) is what a chroot needs
	*F*) ;;
	*)
		magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
		mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
		line=$(printf ':qemu-aarch64:M::%s:%s:%s:POCF' "$magic" "$mask" "$interp") ;;
	esac
	if ! printf '%s' "$line" >"$dir/register" 2>/dev/null; then
		# another process registered it in between
		[ -e "$dir/qemu-aarch64" ] || { echo "cannot register qemu-aarch64 with binfmt_misc" >&2; return 1; }
	fi
	echo "registered: $(sed -n 's/^interpreter //p' "$dir/qemu-aarch64")"
}

rootfs() {
	mkdir -p "$1"
	out=$(cd "$1" && pwd)
	packages="busybox-static libc6 libgcc-s1 libc-bin time"
	stamp=$( (cat "$0" "$(dirname "$0")/debian_arm64.sh"; echo "$packages") | sha256sum | cut -c1-16)
	[ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] && return 0
	for tool in apt-get dpkg-deb qemu-aarch64-static; do
		command -v "$tool" >/dev/null || { echo "$tool is missing (vendor/packages.txt [test])" >&2; return 1; }
	done
	rm -rf "$out/root" "$out/stamp"
	apt=$out/apt
	mkdir -p "$out/root"
	arm64_apt "$apt"
	apt-get update -qq >/dev/null
	(cd "$apt/archives" && apt-get download -qq $packages >/dev/null)
	for deb in "$apt"/archives/*.deb; do dpkg-deb -x "$deb" "$out/root"; done
	root=$out/root
	merge_usr "$root"
	# busybox's applets, where Debian's own programs (getconf, ldd, time) are not
	for a in $(qemu-aarch64-static "$root/usr/bin/busybox" --list); do
		[ -e "$root/usr/bin/$a" ] || [ -e "$root/usr/sbin/$a" ] || ln -s busybox "$root/usr/bin/$a"
	done
	mkdir -p "$root/etc" "$root/tmp" "$root/dev" "$root/proc" "$root/home"
	chmod 1777 "$root/tmp"
	echo "$stamp" >"$out/stamp"
}

case ${1:-} in
binfmt) binfmt ;;
rootfs) [ $# -eq 2 ] || { echo "usage: $0 rootfs DIR" >&2; exit 2; }; rootfs "$2" ;;
*) echo "usage: $0 binfmt | rootfs DIR" >&2; exit 2 ;;
esac
