#!/bin/sh
test_description='make install into a staging directory, as deploy/Dockerfile does; the installed iot-operator runs'
. "${0%/*}/test-lib.sh"

STAGE="$TRASH/stage"

test_expect_success 'make install DESTDIR=... prefix=/usr' '
	make --no-print-directory -C "$PROJECT_ROOT" ${KOP_SANITIZE:+SANITIZE=1} install \
		DESTDIR="$STAGE" prefix=/usr >make.out 2>&1 &&
	for t in iot-operator kwatch ireconcile kapply kstatus; do
		test -x "$STAGE/usr/bin/$t" || { echo "missing $t"; return 1; }
	done &&
	test -f "$STAGE/usr/share/iot-operator/pipeline/iotservice/program.yml"
'

test_expect_success 'the installed iot-operator --help runs' '
	"$STAGE/usr/bin/iot-operator" --help >out &&
	head -n 1 out >first &&
	echo "usage: iot-operator [options]" >expect &&
	test_cmp expect first
'

test_expect_success 'the installed iot-operator finds its program and stages beside itself' '
	(
		OPERATOR_NAME=o PATH=/usr/bin:/bin "$STAGE/usr/bin/iot-operator" --leader-elect=false \
			--metrics-addr 127.0.0.1:0 2>sup.err &
		echo $! >sup.pid
		wait $!
		echo $? >sup.code.tmp && mv sup.code.tmp sup.code
	) &
	test_wait_for 10 grep -q "pipeline started" sup.err &&
	kill -TERM "$(cat sup.pid)" &&
	test_wait_for 15 test -f sup.code &&
	grep "\"program\":\"$STAGE/usr/bin/../share/iot-operator/pipeline/iotservice\"" sup.err &&
	test_no_sanitizer_report sup.err
'

# The image (make image, and deploy/Dockerfile through it) is made of the
# packages scripts/image.sh names: they must hold every library the tools
# link against (t5009 then loads them inside the image).
test_expect_success 'the image packages hold every runtime library the tools need' '
	command -v objdump >/dev/null && command -v dpkg >/dev/null || { echo "no objdump or dpkg: skipped"; return 0; }
	sed -n "s/^PKGS=\"\(.*\)\"\$/\1/p" "$PROJECT_ROOT/scripts/image.sh" >runtime &&
	test -s runtime &&
	for t in "$STAGE"/usr/bin/*; do
		objdump -p "$t" | awk "\$1 == \"NEEDED\" { print \$2 }" || return 1
	done | sort -u >needed &&
	while read lib; do
		path=$(ldconfig -p | awk -v l="$lib" "\$1 == l { print \$NF; exit }") &&
		test -n "$path" &&
		pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1) || pkg=
		test -n "$pkg" || pkg=$(dpkg -S "$path" | head -n 1 | cut -d: -f1)
		case "$pkg" in
		libasan*|libubsan*|libgcc-s1|libstdc++6) continue ;;
		esac
		grep -qw -- "$pkg" runtime || { echo "$lib ($pkg) is not among the packages of scripts/image.sh"; return 1; }
	done <needed
'

test_done
