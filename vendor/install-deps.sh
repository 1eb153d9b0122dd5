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
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" && continue
  # a command of the package's name from elsewhere counts (nodesource's nodejs carries npm, and Debian's npm
  # package conflicts with it)
  case "$(command -v "$p" 2>/dev/null)" in /*) continue ;; esac
  missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "odp: installing Debian packages:$missing" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null || true
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
# npm packages the tests need, exactly as the committed lock says (never committed themselves)
case "$groups" in
  test|all)
    browser="$here/../tests/browser"
    if [ ! -d "$browser/node_modules" ] || [ "$browser/package-lock.json" -nt "$browser/node_modules" ]; then
      echo "odp: installing npm packages for the browser tests (tests/browser)" >&2
      (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) && touch "$browser/node_modules"
    fi ;;
esac
