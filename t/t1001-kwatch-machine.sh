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

# An object handed on as its text (--pass-text: kwatch's watches of whole
# objects) goes through the same states as one parsed: every fixture gives
# the same requests, events and decisions either way.
test_expect_success 'state machine: every fixture the same with the objects handed on as text' '
	for in in "$FIXTURES"/*.in.jsonl; do
		name=$(basename "$in" .in.jsonl) &&
		set -- pods /api/v1/namespaces/n/pods Pod v1 &&
		if test -f "$FIXTURES/$name.args"; then
			set -- &&
			while IFS= read -r arg; do
				test "$arg" = --pass-text || set -- "$@" "$arg"
			done <"$FIXTURES/$name.args"
		fi &&
		"$KOP_TEST_TOOL" watch-sim "$@" <"$in" >"$name.parsed" &&
		! grep " text=" "$name.parsed" &&
		"$KOP_TEST_TOOL" watch-sim --pass-text "$@" <"$in" >"$name.text" &&
		sed "s/ text=.*//" "$name.text" >"$name.text.ids" &&
		test_cmp "$name.parsed" "$name.text.ids" || return 1
	done &&
	grep -c " text=" *.text >texts &&
	grep -q ":[1-9]" texts
'

# Many objects (the map grows several times), then a relist where every
# third is gone and every fifth changed: exactly those events come out.
test_expect_success 'relist difference over 1000 objects' '
	jq -n -c "
		def obj(\$i; \$rv): {metadata: {name: \"o\(\$i)\", namespace: \"n\", uid: \"u\(\$i)\", resourceVersion: \$rv}};
		{code: 200, list: {metadata: {resourceVersion: \"5000\"}, items: [range(1; 1001) | obj(.; \"\(.)\")]}},
		{code: 410, status: {code: 410, message: \"expired\"}},
		{code: 200, list: {metadata: {resourceVersion: \"6000\"}, items: [range(1; 1001) | select(. % 3 != 0)
			| obj(.; if . % 5 == 0 then \"\(. + 5000)\" else \"\(.)\" end)]}}
	" >many.in.jsonl &&
	"$KOP_TEST_TOOL" watch-sim --no-streaming pods /p Pod v1 <many.in.jsonl >many.out &&
	test $(grep -c "^ADDED" many.out) = 1000 &&
	test $(grep -c "^DELETED" many.out) = 333 &&
	test $(grep -c "^DELETED .* 6000$" many.out) = 333 &&
	test $(grep -c "^MODIFIED" many.out) = 134 &&
	grep "^state synced=1 rv=6000 objects=667 " many.out
'

test_done
