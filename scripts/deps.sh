#!/bin/sh
# Installs the Debian packages that building and testing iot-operator need
# (mmdebstrap, umoci, skopeo: make image and its test, t5009).
# Idempotent and fast when everything is there; as a non-root user it prints
# the exact command to run instead.
set -eu

PKGS="gcc make pkg-config libc6-dev libjq-dev libonig-dev libcurl4-openssl-dev
libyaml-dev libssl-dev libmicrohttpd-dev zlib1g-dev jq perl curl openssl valgrind clang
mmdebstrap umoci skopeo"

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages:$missing" >&2
	echo "deps: run as root: apt-get update && $cmd" >&2
	exit 100
fi
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# Update the package lists once if they are missing or more than a day old.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
	apt-get update -qq
fi
$cmd -qq
