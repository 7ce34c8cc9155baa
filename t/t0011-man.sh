#!/bin/sh
test_description='make install: every tool and its manual page (made from its --help), which renders with every option'
. "${0%/*}/test-lib.sh"
test_normal_pass_only 'make install and the manual pages are the same for either build'

command -v help2man >/dev/null || test_skip_all 'help2man is not installed (scripts/deps.sh installs it)'
command -v groff >/dev/null || test_skip_all 'groff is not installed (make check installs it: scripts/deps.sh --test)'

TOOLS="kwatch ireconcile kapply kstatus iot-operator ksim"
STAGE="$TRASH/stage"

# TOOL: its page as a reader sees it, plain text, long lines, no hyphenation
render () {
	groff -man -Tutf8 -rLL=300n -rHY=0 -P-cbou "$STAGE/usr/local/share/man/man1/$1.1" 2>groff.err &&
	! test -s groff.err
}

test_expect_success 'make install DESTDIR=...: the tools in bin/, a page each in share/man/man1' '
	make --no-print-directory -C "$PROJECT_ROOT" install DESTDIR="$STAGE" >make.out 2>&1 &&
	for t in $TOOLS; do
		test -x "$STAGE/usr/local/bin/$t" &&
		test -f "$STAGE/usr/local/share/man/man1/$t.1" || { echo "missing $t or its page"; return 1; }
	done &&
	test -f "$STAGE/usr/local/share/iot-operator/pipeline/iotservice/program.yml" &&
	ls "$STAGE/usr/local/share/man/man1" >pages &&
	printf "%s.1\n" $TOOLS | sort >expect && test_cmp expect pages
'

for t in $TOOLS; do
	test_expect_success "$t.1 renders: NAME, SYNOPSIS, OPTIONS with every option of $t --help, SEE ALSO" '
		render '$t' >page &&
		grep -q "^NAME" page && grep -q "^SYNOPSIS" page && grep -q "^OPTIONS" page && grep -q "^SEE ALSO" page &&
		grep -Eq "^ +'$t' - [a-z]" page &&
		sed -n "/^SYNOPSIS/,/^DESCRIPTION/p" page | grep -Eq "^ +'$t' " &&
		"$KOP_BIN/'$t'" --help >help &&
		grep -Eo -- "(^|[ ,[])--[a-z][a-z0-9-]*" help | sed "s/^[ ,[]//" | sort -u >options &&
		test -s options &&
		while read -r o; do
			grep -Eq -- "(^|[ ,[])$o([^a-z0-9-]|$)" page || { echo "$o of --help is not in '$t'.1"; return 1; }
		done <options
	'
done

# Every line but the synopsis (laid out anew) and the lone headings ("environment:"),
# which are the page's sections.
test_expect_success 'the page says what --help says: every other line of the help is in the page, word for word' '
	for t in $TOOLS; do
		render $t | tr -s " \n\t" "   " >page &&
		"$KOP_BIN/$t" --help >help &&
		sed -e "1d" -e "s/^ *//" help | grep -v -e "^$" -e "^$t " -e "^[A-Za-z ]*:$" >lines &&
		test "$(wc -l <lines)" -gt 5 &&
		while IFS= read -r l; do
			w=$(printf "%s" "$l" | tr -s " \t" "  ") &&
			grep -qF -- "$w" page || { echo "$t: not in the page: $w"; return 1; }
		done <lines || return 1
	done
'

test_expect_success 'PREFIX (or prefix) and DESTDIR: pages under PREFIX/share/man/man1' '
	make --no-print-directory -C "$PROJECT_ROOT" install-man DESTDIR="$TRASH/p" PREFIX=/opt/iot >make.out 2>&1 &&
	test -f "$TRASH/p/opt/iot/share/man/man1/kwatch.1" &&
	! test -e "$TRASH/p/usr"
'

test_done
