#!/bin/sh
# make image: the operator's OCI image, built from Debian's packages without a
# container daemon or a registry.
#
#   scripts/image.sh                 the image as an OCI archive ($IMAGE_OUT), then its size and
#                                    what takes the space
#   scripts/image.sh --rootfs DIR    only its root filesystem, in DIR (what deploy/Dockerfile copies)
#   scripts/image.sh --can-build     exit 0 when the packages are cached or the mirror answers, else
#                                    say why and exit 1 (the tests skip then)
#
# The root filesystem: the runtime packages below extracted by mmdebstrap (no
# maintainer scripts, so no dpkg, apt, debconf or perl to run them), cut down
# to the shared libraries the installed tools load (ld.so --list), the CA
# bundle, user and group 65532, and `make install-bin prefix=/usr` (ksim left out:
# it is the test cluster, not the operator). umoci packs it as one layer; the
# archive also holds docker load's manifest.json beside the OCI index.json.
#
# Environment: KOP_BIN (the tools to install, default bin/; make image sets it), IMAGE_OUT (default build/image/iot-operator.tar), IMAGE_NAME (default
# iot-operator:latest), IMAGE_SUITE (default bookworm), IMAGE_MIRROR (default
# http://deb.debian.org/debian), IMAGE_SECURITY (default http://deb.debian.org/debian-security).
# The extracted packages are cached in build/image/base-KEY.tar, KEY naming the
# package list, suite and mirrors: remove build/image to take newer packages.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KOP_BIN=${KOP_BIN:-$ROOT/bin}
IMAGE_OUT=${IMAGE_OUT:-$ROOT/build/image/iot-operator.tar}
IMAGE_NAME=${IMAGE_NAME:-iot-operator:latest}
IMAGE_SUITE=${IMAGE_SUITE:-bookworm}
IMAGE_MIRROR=${IMAGE_MIRROR:-http://deb.debian.org/debian}
IMAGE_SECURITY=${IMAGE_SECURITY:-http://deb.debian.org/debian-security}
CACHE=$ROOT/build/image
# What the tools link against (ldd of bin/*), and the CA bundle; their
# dependencies come along and are cut down afterwards.
PKGS="libc6 libcurl4 libjq1 libonig5 libyaml-0-2 libssl3 libmicrohttpd12 libzstd1 ca-certificates"
ARCH=x86_64-linux-gnu

say () { printf '%s\n' "image: $*" >&2; }
fail () {
	printf '%s\n' "image: error: $*" >&2
	exit 1
}

sources="deb $IMAGE_MIRROR $IMAGE_SUITE main
deb $IMAGE_MIRROR $IMAGE_SUITE-updates main
deb $IMAGE_SECURITY $IMAGE_SUITE-security main"
key=$(printf '%s\n%s\n%s\n' "$PKGS" "$IMAGE_SUITE" "$sources" | sha256sum | cut -c1-16)
base=$CACHE/base-$key.tar

usage="usage: scripts/image.sh [--rootfs DIR | --can-build]"
rootfs_only=
case "${1:-}" in
--rootfs)
	test $# = 2 || fail "$usage"
	rootfs_only=$2
	;;
--can-build)
	test $# = 1 || fail "$usage"
	test -s "$base" && exit 0
	if ! err=$(curl -sSf -m 10 -o /dev/null "$IMAGE_MIRROR/dists/$IMAGE_SUITE/InRelease" 2>&1); then
		say "$IMAGE_MIRROR unreachable: $err"
		exit 1
	fi
	exit 0
	;;
'') ;;
*) fail "$usage" ;;
esac
test "$(id -u)" = 0 || fail "needs root (the root filesystem's files are owned by root)"
for t in iot-operator kwatch ireconcile kapply kstatus; do
	test -x "$KOP_BIN/$t" || fail "'$KOP_BIN/$t' is missing: run 'make' first"
done

# The packages extracted, from the cache or by mmdebstrap.
base_tar () {
	if test -s "$base"; then
		say "packages from the cache ($base)"
		return 0
	fi
	command -v mmdebstrap >/dev/null || fail "mmdebstrap is not installed: run 'scripts/deps.sh --image'"
	mkdir -p "$CACHE"
	say "extracting $PKGS from $IMAGE_SUITE"
	# chrootless + extract: nothing runs inside the new tree, so no privileges beyond
	# owning the files are needed (docker build's stage can run it too).
	echo "$sources" | mmdebstrap --quiet --mode=chrootless --variant=extract --format=tar \
		--include="$(echo $PKGS | tr ' ' ,)" "$IMAGE_SUITE" "$base.tmp" - ||
		fail "mmdebstrap failed (is $IMAGE_MIRROR reachable?)"
	mv "$base.tmp" "$base"
}

# The shared libraries FILE needs, as paths inside the root filesystem R.
needed_libs () {
	"$1/lib64/ld-linux-x86-64.so.2" --library-path "$1/lib/$ARCH:$1/usr/lib/$ARCH" --list "$2" |
		sed -n 's|.* => \(/[^ ]*\) .*|\1|p' | sed "s|^$1||"
}

# Cuts the extracted packages down to what the installed tools use.
prune () {
	r=$1
	# The runtime provides /proc, /etc/hosts, /etc/resolv.conf and /etc/hostname.
	rm -rf "$r"/etc/resolv.conf "$r"/etc/hostname "$r"/etc/fstab
	# No package manager, its databases, its configuration or its scripts.
	rm -rf "$r"/var/lib/dpkg "$r"/var/lib/apt "$r"/var/cache "$r"/var/log "$r"/etc/apt \
		"$r"/etc/debconf.conf "$r"/etc/ca-certificates "$r"/etc/gss "$r"/etc/ld.so.conf.d \
		"$r"/usr/bin "$r"/usr/sbin "$r"/usr/lib/sasl2 "$r"/usr/lib/ssl/misc
	# Docs, man pages, locales, perl modules (debconf's), lintian overrides.
	rm -rf "$r"/usr/share/doc "$r"/usr/share/man "$r"/usr/share/locale "$r"/usr/share/lintian \
		"$r"/usr/share/perl5 "$r"/usr/share/debconf "$r"/usr/share/bash-completion \
		"$r"/usr/share/pixmaps "$r"/usr/share/info
	# One CA bundle where libcurl and OpenSSL look for it (what update-ca-certificates
	# would have written), instead of the certificates one by one.
	mkdir -p "$r"/etc/ssl/certs
	cat "$r"/usr/share/ca-certificates/*/*.crt >"$r"/etc/ssl/certs/ca-certificates.crt
	rm -rf "$r"/usr/share/ca-certificates
}

# Keeps, of the libraries, those the tools load (and their symlinks), plus
# libgcc_s.so.1, which glibc opens itself to unwind a cancelled thread.
keep_needed_libs () {
	r=$1
	keep=$(mktemp)
	for exe in "$r"/usr/bin/*; do
		needed_libs "$r" "$exe" || fail "ld.so cannot list the libraries of $exe"
	done | sort -u >"$keep.names"
	{
		echo /lib64/ld-linux-x86-64.so.2
		echo /lib/$ARCH/ld-linux-x86-64.so.2
		echo /lib/$ARCH/libgcc_s.so.1
		while read -r lib; do
			echo "$lib"
			# The file the name points to.
			target=$(readlink -f "$r$lib")
			echo "${target#"$r"}"
		done <"$keep.names"
	} | sort -u >"$keep"
	for d in lib/$ARCH usr/lib/$ARCH; do
		(cd "$r" && find "$d" -mindepth 1 -maxdepth 1) | while read -r f; do
			grep -qxF "/$f" "$keep" || rm -rf "${r:?}/$f"
		done
	done
	rm -f "$keep" "$keep.names"
}

add_user () {
	r=$1
	cat >"$r"/etc/passwd <<-EOF
	root:x:0:0:root:/root:/usr/sbin/nologin
	nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin
	EOF
	cat >"$r"/etc/group <<-EOF
	root:x:0:
	nonroot:x:65532:
	EOF
	printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$r"/etc/nsswitch.conf
	install -d -m 700 -o 65532 -g 65532 "$r"/home/nonroot
	install -d -m 1777 "$r"/tmp
	install -d "$r"/dev "$r"/proc "$r"/sys "$r"/root
}

make_rootfs () {
	r=$1
	base_tar
	rm -rf "$r"
	mkdir -p "$r"
	# Not the device nodes (a container build cannot make them; the runtime provides /dev).
	tar -C "$r" --exclude='./dev/*' -xf "$base"
	prune "$r"
	# The tools as built (-o all: never rebuilt here, whatever the flags).
	# The tools and programs; no manual pages in an image without man.
	make -C "$ROOT" --no-print-directory -s -o all install-bin BIN="$KOP_BIN" DESTDIR="$r" prefix=/usr >&2 ||
		fail "make install failed"
	rm -f "$r"/usr/bin/ksim
	strip --strip-unneeded "$r"/usr/bin/*
	keep_needed_libs "$r"
	add_user "$r"
}

if test -n "$rootfs_only"; then
	make_rootfs "$rootfs_only"
	say "root filesystem in $rootfs_only"
	exit 0
fi

command -v umoci >/dev/null || fail "umoci is not installed: run 'scripts/deps.sh --image'"
# Not under build/: the Makefile reads every *.d there (etc/*.d are directories).
work=$(mktemp -d "${TMPDIR:-/tmp}/iot-operator-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
make_rootfs "$work/rootfs"

# The OCI layout: one layer, the configuration deploy/operator.yaml relies on.
tag=${IMAGE_NAME##*:}
say "packing $IMAGE_NAME"
umoci init --layout "$work/oci"
umoci new --image "$work/oci:$tag"
umoci unpack --image "$work/oci:$tag" "$work/bundle" >/dev/null
rm -rf "$work/bundle/rootfs"
mv "$work/rootfs" "$work/bundle/rootfs"
umoci repack --image "$work/oci:$tag" --history.created_by "scripts/image.sh" "$work/bundle"
umoci config --image "$work/oci:$tag" --os linux --architecture amd64 \
	--config.user 65532:65532 --config.entrypoint /usr/bin/iot-operator --clear config.cmd \
	--config.exposedports 60000/tcp --config.workingdir / \
	--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--history.created_by "scripts/image.sh: user, entrypoint"
umoci gc --layout "$work/oci"

# The image's name in index.json (podman, skopeo, containerd read it) and
# docker load's manifest.json.
oci=$work/oci
mdigest=$(jq -r '.manifests[0].digest' "$oci/index.json")
manifest=$oci/blobs/sha256/${mdigest#sha256:}
case "$IMAGE_NAME" in
*/*) full=$IMAGE_NAME ;;
*) full=docker.io/library/$IMAGE_NAME ;;
esac
jq -c --arg name "$full" '.manifests[0].annotations = {
	"org.opencontainers.image.ref.name": $name, "io.containerd.image.name": $name}' \
	"$oci/index.json" >"$oci/index.json.tmp"
mv "$oci/index.json.tmp" "$oci/index.json"
jq -c --arg tag "$IMAGE_NAME" '[{Config: ("blobs/sha256/" + (.config.digest | ltrimstr("sha256:"))),
	RepoTags: [$tag], Layers: [.layers[].digest | "blobs/sha256/" + ltrimstr("sha256:")]}]' \
	"$manifest" >"$oci/manifest.json"
mkdir -p "$(dirname "$IMAGE_OUT")"
tar -C "$oci" --sort=name --owner=0 --group=0 --numeric-owner --mode=a+rX \
	-cf "$IMAGE_OUT.tmp" oci-layout index.json manifest.json blobs
mv "$IMAGE_OUT.tmp" "$IMAGE_OUT"

# What takes the space: the unpacked root filesystem by Debian package (the
# file's package on this machine), then its ten largest files.
root=$work/bundle/rootfs
total=$(du -sb "$root" | cut -f1)
say "wrote $IMAGE_OUT ($IMAGE_NAME): $(du -b "$IMAGE_OUT" | cut -f1) bytes compressed, $total unpacked"
(cd "$root" && find . -type f -printf '%s /%P\n') | while read -r size path; do
	case "$path" in
	/usr/bin/*|/usr/share/iot-operator/*) pkg=iot-operator ;;
	*) pkg=$(dpkg-query -S "$path" 2>/dev/null | sed -n '1s/:.*//p') ;;
	esac
	printf '%s %s %s\n' "$size" "$path" "${pkg:-image.sh}"
done | sort -rn >"$work/files"
printf '%10s  %s\n' bytes "package (files)"
awk '{ size[$3] += $1; n[$3]++ } END { for (p in size) printf "%10d  %s (%d)\n", size[p], p, n[p] }' "$work/files" | sort -rn
printf '%10s  %s\n' bytes "largest files"
head -n 10 "$work/files" | awk '{ printf "%10d  %s (%s)\n", $1, $2, $3 }'
