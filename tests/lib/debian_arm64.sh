# shellcheck shell=sh
# Debian 12 arm64 packages for the test rigs, without touching this machine's apt (no foreign architecture
# added, no dpkg lock taken): sourced by tests/lib/aarch64_user.sh (qemu-user root) and
# tests/board_twin/build.sh (the board twins' initramfs).
#   arm64_apt DIR     a private apt configuration in DIR (package lists, status, archive cache; the host's
#                     Debian sources read for arm64); exports APT_CONFIG for apt-get and apt-cache
#   merge_usr ROOT    /bin, /sbin and /lib as links into /usr, as Debian 12 has them (base-files would make
#                     them; dpkg-deb -x does not)

arm64_apt() {
	mkdir -p "$1/lists/partial" "$1/archives/partial" "$1/sources"
	: >"$1/status"
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && cp "$f" "$1/sources/"
	done
	cat >"$1/apt.conf" <<-CONF
	APT::Architecture "arm64";
	APT::Architectures { "arm64"; };
	APT::Sandbox::User "root";
	APT::Install-Recommends "false";
	Dir::State "$1";
	Dir::State::status "$1/status";
	Dir::State::Lists "$1/lists";
	Dir::Cache "$1";
	Dir::Cache::Archives "$1/archives";
	Dir::Etc::SourceList "/dev/null";
	Dir::Etc::SourceParts "$1/sources";
	Dir::Etc::Preferences "/dev/null";
	Dir::Etc::PreferencesParts "/dev/null";
	CONF
	APT_CONFIG="$1/apt.conf"
	export APT_CONFIG
}

merge_usr() {
	for d in bin sbin lib; do
		if [ -d "$1/$d" ] && [ ! -L "$1/$d" ]; then
			mkdir -p "$1/usr/$d"
			cp -a "$1/$d/." "$1/usr/$d/"
			rm -rf "${1:?}/$d"
		fi
		mkdir -p "$1/usr/$d"
		ln -s "usr/$d" "$1/$d"
	done
}
