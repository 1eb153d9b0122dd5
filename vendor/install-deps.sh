#!/bin/sh
# Installs the Debian packages odp needs. Usage: vendor/install-deps.sh [build|test|all]
# Idempotent and quiet when everything is already there.
set -eu
groups=${1:-all}
here=$(dirname "$0")
pkgs=$(awk -v want="$groups" '
  /^#/ || NF == 0 { next }
  /^\[/ { g = substr($0, 2, length($0) - 2); next }
  want == "all" || want == g || (want == "test" && g == "build") { print }
' "$here/packages.txt")
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "odp: installing Debian packages:$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
