#!/bin/sh
# After a failed run of the tests (make check): what each failed test said,
# its last lines, once more at the very end of the output, where a CI log
# that keeps only its tail still shows why (test-lib.sh prints them on
# stderr as the test fails, among the other scripts' lines).
#
#   t/failures.sh t/tNNNN-name.sh...
#
# For each script named whose trash directory is left (test-lib.sh removes it
# when every test passed): each failed test's title and the last
# KOP_FAILURES_LINES lines (default 12) of what it printed, cut to 200
# characters a line; a script that left its trash without a failed test (it
# was killed, or failed outside a test) is named so.
lines=${KOP_FAILURES_LINES:-12}
dir=$(cd "${0%/*}" && pwd)
for t in "$@"; do
	name=${t##*/}
	name=${name%.sh}
	trash=$dir/trash.$name
	test -d "$trash" || continue
	# (in the order of the tests: .failed.2 before .failed.10)
	ls -A "$trash" | sed -n "s/^[.]failed[.]\([0-9]*\)\$/\1/p" | sort -n | while read -r n; do
		f=$trash/.failed.$n
		echo "# $name: not ok $(head -n 1 "$f")"
		sed 1d "$f" | tail -n "$lines" | cut -c 1-200 | sed 's/^/#	/'
	done
	ls -A "$trash" | grep -q "^[.]failed[.]" ||
		echo "# $name: failed outside a test, or was killed (t/trash.$name is left)"
done
exit 0
