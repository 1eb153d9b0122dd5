#!/bin/sh
# Build the arm64 board twins' guest: build.sh [OUT_DIR]  (default build/board_twin; tests/board_twin/README.md)
# One guest serves both twins (the Pi 5 and the Graviton differ in QEMU's -cpu/-smp and the login user):
#   OUT_DIR/Image              Debian's arm64 kernel (linux-image-6.1.0-*-arm64)
#   OUT_DIR/initramfs.cpio     the whole root: busybox, dropbear, sftp-server, glibc, getconf, perf
#   OUT_DIR/id_ed25519         the login key of users pi and ubuntu (0600)
#   OUT_DIR/host_ed25519.pub   the guest's host key (the private half is only in the initramfs)
# Everything comes from Debian packages, fetched with a private apt configuration for arm64 (this machine's
# apt is left alone: no foreign architecture added, no lock taken) and cached in OUT_DIR/apt. Building again
# with the same inputs does nothing; a fresh machine needs deb.debian.org once.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/tests/lib/debian_arm64.sh"
out=${1:-$top/build/board_twin}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The guest's packages, with their dependencies (apt resolves them). linux-perf: the guest's own perf stat,
# the oracle of odp-rusage's counters; libc-bin: getconf GNU_LIBC_VERSION for preflight; base-files:
# /etc/os-release (Debian 12, as Raspberry Pi OS bookworm reports); time: GNU time -v, the peak-RSS oracle
# for the runner (busybox time reads ru_maxrss as pages: 4x too much).
PACKAGES="busybox-static dropbear-bin openssh-sftp-server libc-bin linux-perf base-files time"

stamp=$( (cat "$0" "$here/init" "$top/tests/lib/debian_arm64.sh"; echo "$PACKAGES") | sha256sum | cut -c1-16)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] && [ -f "$out/initramfs.cpio" ] && [ -f "$out/Image" ]; then
	exit 0
fi
rm -f "$out/stamp"

for tool in apt-get dpkg-deb cpio ssh-keygen qemu-aarch64-static; do
	command -v "$tool" >/dev/null || { echo "$0: $tool is missing (vendor/packages.txt [test])" >&2; exit 1; }
done

apt=$out/apt
arm64_apt "$apt"
# Package lists at most a day old: a cached build does not reach the network.
if [ -z "$(find "$apt/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
	apt-get update -qq >/dev/null
fi
kernel=$(apt-cache depends linux-image-arm64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*-arm64\)$/\1/p' | head -n 1)
[ -n "$kernel" ] || { echo "$0: no linux-image-*-arm64 in the arm64 package lists" >&2; exit 1; }
# shellcheck disable=SC2086
apt-get install -d -y -qq $PACKAGES >/dev/null
(cd "$apt/archives" && apt-get download -qq "$kernel" >/dev/null)

root=$out/root
rm -rf "$root"
mkdir -p "$root"
for deb in "$apt"/archives/*.deb; do
	case $(basename "$deb") in linux-image-*) continue ;; esac
	dpkg-deb -x "$deb" "$root"
done
# What the dependencies bring and the guest never runs, out of the initramfs (a smaller one boots faster):
# docs, locales, iconv modules, PAM modules, the Perl and Python interpreters and libraries (perf stat
# links libperl and libpython but runs neither), the SSH client programs.
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/locale" "$root/usr/share/info" \
	"$root/usr/share/perl" "$root/usr/share/perl5" "$root/usr/lib/python3.11" "$root/usr/lib/python3" \
	"$root/usr/lib/aarch64-linux-gnu/perl" "$root/usr/lib/aarch64-linux-gnu/perl-base" "$root/usr/lib/debug" \
	"$root/usr/lib/aarch64-linux-gnu/gconv" "$root/usr/lib/aarch64-linux-gnu/security" \
	"$root"/usr/bin/perl* "$root"/usr/bin/python3* "$root"/usr/bin/ssh "$root"/usr/bin/ssh-* "$root"/usr/bin/scp \
	"$root"/usr/bin/sftp

kdir=$out/kernel
rm -rf "$kdir"
dpkg-deb -x "$apt/archives/${kernel}_"*.deb "$kdir"
cp "$kdir"/boot/vmlinuz-* "$out/Image"
# virtio is built as modules in Debian's arm64 kernel: the init loads these (order matters) itself.
mkdir -p "$root/lib/twin-modules"
n=0
for m in net/core/failover drivers/net/net_failover drivers/virtio/virtio_mmio drivers/net/virtio_net; do
	n=$((n + 1))
	cp "$kdir"/lib/modules/*/kernel/$m.ko "$root/lib/twin-modules/$n-$(basename "$m").ko"
done
rm -rf "$kdir"

merge_usr "$root"
mkdir -p "$root/dev" "$root/proc" "$root/sys" "$root/tmp" "$root/run" "$root/root" "$root/etc/dropbear" \
	"$root/home/pi/.ssh" "$root/home/ubuntu/.ssh" "$root/var/log"
cp "$here/init" "$root/init"
chmod 755 "$root/init"

# Accounts: root, and the login users of a Raspberry Pi OS image (pi) and an Ubuntu EC2 image (ubuntu).
cat >"$root/etc/passwd" <<PW
root:x:0:0:root:/root:/bin/sh
pi:x:1000:1000:pi:/home/pi:/bin/sh
ubuntu:x:1001:1001:ubuntu:/home/ubuntu:/bin/sh
PW
cat >"$root/etc/group" <<GR
root:x:0:
pi:x:1000:
ubuntu:x:1001:
GR
printf 'root:*:19000:0:99999:7:::\npi:*:19000:0:99999:7:::\nubuntu:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
chmod 640 "$root/etc/shadow"
echo /bin/sh >"$root/etc/shells"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n' >"$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n' >"$root/etc/hosts"

# Keys, new for every build: the login key (host side) and the host key (guest side; dropbear's format,
# made by the guest's own dropbearkey under qemu-user).
rm -f "$out/id_ed25519" "$out/id_ed25519.pub"
ssh-keygen -q -t ed25519 -N '' -C odp-board-twin -f "$out/id_ed25519"
chmod 600 "$out/id_ed25519"
for u in pi ubuntu; do cp "$out/id_ed25519.pub" "$root/home/$u/.ssh/authorized_keys"; done
qemu-aarch64-static -L "$root" "$root/usr/bin/dropbearkey" -t ed25519 -f "$root/etc/dropbear/dropbear_ed25519_host_key" >/dev/null 2>&1
qemu-aarch64-static -L "$root" "$root/usr/bin/dropbearkey" -y -f "$root/etc/dropbear/dropbear_ed25519_host_key" |
	grep '^ssh-ed25519 ' | cut -d' ' -f1,2 >"$out/host_ed25519.pub"
[ -s "$out/host_ed25519.pub" ] || { echo "$0: dropbearkey made no host key" >&2; exit 1; }

# 0600: the initramfs holds the twin's private host key
(umask 077 && cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out/initramfs.cpio.tmp"
chmod 600 "$out/initramfs.cpio.tmp"
mv "$out/initramfs.cpio.tmp" "$out/initramfs.cpio"
rm -rf "$root"
echo "$stamp" >"$out/stamp"
