#!/bin/sh
test_description='kwatch: the list-and-watch state machine (lib/watch.c) on canned answers'
. "${0%/*}/test-lib.sh"

# Each NAME.in.jsonl is a sequence of server answers (see t/helper/test-watch.c);
# NAME.expect holds the requests made, the events emitted and the decisions.
# NAME.args, when present, holds the arguments, one per line.
for in in "$FIXTURES"/*.in.jsonl; do
	name=$(basename "$in" .in.jsonl)
	test_expect_success "state machine: $name" '
		set -- pods /api/v1/namespaces/n/pods Pod v1 &&
		if test -f "$FIXTURES/$name.args"; then
			set -- &&
			while IFS= read -r arg; do set -- "$@" "$arg"; done <"$FIXTURES/$name.args"
		fi &&
		"$KOP_TEST_TOOL" watch-sim "$@" <"$in" >"$name.out" &&
		test_cmp_golden "$FIXTURES/$name.expect" "$name.out"
	'
done

test_done
