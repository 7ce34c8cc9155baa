#!/bin/sh
test_description='ireconcile: a render program runs again only when the primary (without status), related or settings change'
. "${0%/*}/test-lib.sh"

# wait_applies FILE N: until FILE holds N apply lines (30 s at most).
wait_applies () {
	test_wait_for 30 test_has_ops "$1" apply "$2" || :
}

# wait_reconciles FILE N: until ireconcile -v's log FILE records N reconciles (30 s at most).
wait_reconciles () {
	test_wait_for 30 test_has_reconciles "$1" "$2" || :
}

# applied TYPE RV FILE: FILE's applies as watch events of TYPE, as the API
# server would send them back (a uid, resourceVersion RV).
applied () {
	jq -c --arg type "$1" --arg rv "$2" "select(.op == \"apply\") | {type: \$type, object: (.object
		| .metadata.uid = \"u-\(.metadata.name)\" | .metadata.resourceVersion = \$rv)}" "$3"
}

# plain_shape: 05-shape.jsonl's Shape made plain (sync gives back the rendered children as it saw them).
plain_shape () {
	jq -c "if .object.kind == \"Shape\" then .object.spec.plain = true else . end" "$FIXTURES/05-shape.jsonl"
}

# s1_0_applied_alike FILE: FILE holds two applies of s1-0, the same line twice.
s1_0_applied_alike () {
	jq -c "select(.op == \"apply\" and .object.metadata.name == \"s1-0\")" "$1" >applies &&
	test "$(wc -l <applies)" = 2 &&
	sed -n 1p applies >first &&
	sed -n 2p applies >second &&
	test_cmp first second
}

# The events come in five paced steps, each its own reconcile: the Thing,
# its ConfigMap appearing, a status-only change (someone else's: ours
# coming back would reconcile nothing), a spec change, then a label added
# (the render program gets the metadata too). Each step is sent once the
# one before is reconciled. (Here and below,
# --status-interval 0 writes each step's status in its own reconcile, which
# the tests count; t2104 tests the interval.)
test_expect_success 'the render answer is reused until the spec changes' '
	jq -c ".object.metadata.resourceVersion = \"14\" | .object.metadata.labels = {tier: \"gold\"}" \
		"$FIXTURES/04-spec.jsonl" >05-label.jsonl &&
	mkfifo things.fifo &&
	# Braces: without them "mkfifo && (...) &" sends mkfifo to the background
	# too, and the reader below could open things.fifo before it exists.
	{ ( n=0; for f in "$FIXTURES/01-thing" "$FIXTURES/02-child" "$FIXTURES/03-status" "$FIXTURES/04-spec" 05-label; do
		cat "$f.jsonl"; n=$((n + 1)); wait_reconciles things.err $n
	  done ) >things.fifo & } &&
	test_ireconcile_fifo things --now 2026-11-22T10:00:00Z --status-interval 0 --no-render-worker "$FIXTURES/things" &&
	test_reconciled things.err renderCached applies statuses >actual &&
	cat >expect <<-\EOT &&
	[false,1,1]
	[true,0,1]
	[true,0,1]
	[false,1,0]
	[false,0,0]
	EOT
	test_cmp expect actual &&
	jq -r "select(.op == \"apply\") | .object.data | \"\(.color) \(.sum)\"" things.out >actual &&
	cat >expect <<-\EOT &&
	red bda9643ac6601722a28f238714274da4
	green 9f27410725ab8cc8854a2769c7a516b8
	EOT
	test_cmp expect actual &&
	jq -c "select(.op == \"status\") | .object.status" things.out >actual &&
	cat >expect <<-\EOT &&
	{"configMaps":0,"sawStatus":false,"sawChildren":false}
	{"configMaps":1,"sawStatus":false,"sawChildren":false}
	{"configMaps":1,"sawStatus":false,"sawChildren":false}
	EOT
	test_cmp expect actual
'

# Before the first pass (the lists still coming), a primary's answer is
# rendered while no input waits: the first pass reads it back. One whose
# spec changes before the first pass is rendered again then. (Without the
# render worker, which t2006 tests, which renders such a change too, when it
# is quicker than the first pass.)
#
# ahead_run NAME THEN: the Thing alone, until it is rendered ahead, then the
# file THEN in one write (read together: nothing rendered in between); the
# first reconcile's [renderCached, applies].
ahead_run () {
	mkfifo "$1.fifo" &&
	{ ( cat thing.jsonl
	    test_wait_for 30 grep -q "rendered ahead of the first pass" "$1.err"
	    cat "$2"
	    wait_reconciles "$1.err" 1
	  ) >"$1.fifo" & } &&
	test_ireconcile_fifo "$1" --now 2026-11-22T10:00:00Z --status-interval 0 --no-render-worker "$FIXTURES/things" &&
	test_reconciled "$1.err" renderCached applies
}

test_expect_success 'a render answer made ahead of the first pass is used by it, unless its input changed' '
	sed -n 1p "$FIXTURES/01-thing.jsonl" >thing.jsonl &&
	sed -n 2p "$FIXTURES/01-thing.jsonl" >bookmark.jsonl &&
	grep -q "\"ADDED\"" thing.jsonl && grep -q initial-events-end bookmark.jsonl &&
	sed "s/\"red\"/\"green\"/; s/\"ADDED\"/\"MODIFIED\"/" thing.jsonl >green.jsonl &&
	cat green.jsonl bookmark.jsonl >green-bookmark.jsonl &&
	ahead_run ahead bookmark.jsonl >actual &&
	echo "[true,1]" >expect &&
	test_cmp expect actual &&
	ahead_run ahead2 green-bookmark.jsonl >actual &&
	echo "[false,1]" >expect &&
	test_cmp expect actual &&
	jq -r "select(.op == \"apply\") | .object.data.color" ahead.out ahead2.out >colors &&
	printf "red\ngreen\n" >expect &&
	test_cmp expect colors
'

# shapes: sync sees the rendered children through the kind's project, and
# what it gives back stands for the whole rendered object (merged with what
# it changed); observed children given back as they came are kept.
test_expect_success 'projected rendered children are applied whole; observed ones given back are kept' '
	mkfifo shapes.fifo &&
	{ ( cat "$FIXTURES/05-shape.jsonl"
	    # its two applies written before they come back as live objects
	    wait_applies shapes.out 2
	    applied ADDED 20 shapes.out
	    wait_reconciles shapes.err 2; cat "$FIXTURES/06-hold.jsonl"
	    wait_reconciles shapes.err 3; cat "$FIXTURES/07-release.jsonl"
	  ) >shapes.fifo & } &&
	test_ireconcile_fifo shapes --now 2026-11-22T10:00:00Z --status-interval 0 --no-render-worker "$FIXTURES/shapes" &&
	test_reconciled shapes.err renderCached applies deletes >actual &&
	cat >expect <<-\EOT &&
	[false,2,0]
	[true,0,0]
	[false,0,0]
	[false,2,0]
	EOT
	test_cmp expect actual &&
	jq -c "select(.op == \"apply\") | [.object.metadata.name, .object.metadata.labels.shape,
		(.object.data | [.color, .size, (.big | length), .extra])]" shapes.out >actual &&
	cat >expect <<-\EOT &&
	["s1-0","s1",["red","3",139,null]]
	["s1-1","s1",["red","3",139,"x"]]
	["s1-0","s1",["blue","4",139,null]]
	["s1-1","s1",["blue","4",139,"x"]]
	EOT
	test_cmp expect actual &&
	jq -c "select(.op == \"status\") | .object.status" shapes.out >actual &&
	cat >expect <<-\EOT &&
	{"sawSpec":false,"seen":[["color"],["color"]],"observed":[]}
	{"sawSpec":false,"seen":[["color"],["color"]],"observed":[["color"],["color"]]}
	EOT
	test_cmp expect actual
'

test_expect_success 'a rendered child that sets a field its kind ignores is a program error, named' '
	cp -R "$FIXTURES/shapes" ignoring &&
	sed -i "s/^    project: .{data: {color: .data.color}}.\$/    project: [data.color]\n    ignore: [[metadata, labels, shape]]/" \
		ignoring/program.yml &&
	grep -q "ignore: \[\[metadata, labels, shape\]\]" ignoring/program.yml &&
	ireconcile --now 2026-11-22T10:00:00Z --once ignoring <"$FIXTURES/05-shape.jsonl" >ignoring.out 2>ignoring.err;
	test_no_sanitizer_report ignoring.err &&
	jq -r "select(.level == \"error\") | .msg" ignoring.err >msgs &&
	grep "rendered ConfigMap .s1-0. (0) sets metadata.labels.shape, which program .shapes. says it never sets (program.yml: ignore)" msgs &&
	! grep -q "\"op\":\"apply\"" ignoring.out
'

# Once every rendered child is held by its live object, the answer as
# computed is not kept (renderKept), only what sync sees: a child changed
# by someone else afterwards is compared with the answer computed again,
# from the same input, and the apply that mends it is the first one. The
# change is in .data.big, 139 bytes: the live copy kept for comparing holds
# only its digest (kop_json_fingerprint).
test_expect_success 'a child changed once the render answer is dropped gets the rendered object again' '
	mkfifo drift.fifo &&
	{ ( plain_shape
	    wait_applies drift.out 2
	    applied ADDED 20 drift.out
	    wait_reconciles drift.err 2
	    applied MODIFIED 21 drift.out | sed -n 1p | jq -c ".object.data.big |= sub(\"49\"; \"94\")"
	    wait_applies drift.out 3
	    applied MODIFIED 22 drift.out | tail -n 1
	    wait_reconciles drift.err 4
	  ) >drift.fifo & } &&
	test_ireconcile_fifo drift --now 2026-11-22T10:00:00Z --status-interval 0 --no-render-worker "$FIXTURES/shapes" &&
	test_reconciled drift.err renderCached renderKept applies >actual &&
	cat >expect <<-\EOT &&
	[false,true,2]
	[true,false,0]
	[true,true,1]
	[true,false,0]
	EOT
	test_cmp expect actual &&
	s1_0_applied_alike drift.out &&
	! grep "\"level\":\"error\"" drift.err
'

# Only s1-0 comes back, so the answer is kept (s1-1 is not held yet); s1-0
# then drifts and is applied again from the kept answer's text, where its
# base64 string is kept packed as a directive: it goes out as it was first.
test_expect_success 'a child applied again from the kept answer goes out as rendered (packed strings unpacked)' '
	mkfifo kept.fifo &&
	{ ( plain_shape
	    wait_applies kept.out 2
	    applied ADDED 20 kept.out | sed -n 1p
	    wait_reconciles kept.err 2
	    applied MODIFIED 21 kept.out | sed -n 1p | jq -c ".object.data.big |= sub(\"49\"; \"94\")"
	    wait_applies kept.out 3
	  ) >kept.fifo & } &&
	test_ireconcile_fifo kept --now 2026-11-22T10:00:00Z --no-render-worker "$FIXTURES/shapes" &&
	test_reconciled kept.err renderCached renderKept applies >actual &&
	cat >expect <<-\EOT &&
	[false,true,2]
	[true,true,0]
	[true,true,1]
	EOT
	test_cmp expect actual &&
	s1_0_applied_alike kept.out &&
	jq -e ".object.data.b64 | type == \"string\"" applies
'

# fickle_retried: the render after the backoff has happened (fickle_run,
# below): a second error logged, or an apply of what the program now answers.
fickle_retried () {
	test "$(grep -c "\"level\":\"error\"" fickle.err)" -ge 2 || grep -q "\"color\":\"late\"" fickle.out
}

# A render program that reads more than its input (here the clock) may fail,
# or answer otherwise, when its answer is computed again: the child that
# needed it is left as it is (never deleted, never applied from what sync
# saw), the error is logged with the primary, and the primary is rendered
# anew after the backoff.
#
# fickle_run WHAT MARGIN: the program does WHAT from MARGIN seconds after
# this call on; its first render must come before that (the applies are
# back before it), the child's change after it. A start slower than MARGIN
# (a loaded machine, a sanitizer build) cannot test this: fickle_run then
# says so and returns 2, and the caller tries again with a longer margin
# (the longest, 40 s, keeps the run within test_ireconcile_fifo's 60 s).
fickle_run () {
	# (an attempt before this one left its output: the writer below must not
	# count its applies before ireconcile's shell empties the file)
	rm -rf fickle fickle.late fickle.out fickle.err && cp -R "$FIXTURES/shapes" fickle &&
	flip=$(( $(date +%s) + $2 )) &&
	{ echo "(if now >= $flip then $1 else . end) as \$_ | \$_ |"; cat "$FIXTURES/shapes/render.jq"; } \
		>fickle/render.jq &&
	rm -f fickle.fifo && mkfifo fickle.fifo &&
	{ ( plain_shape
	    wait_applies fickle.out 2
	    test "$(date +%s)" -lt "$flip" || touch fickle.late
	    applied ADDED 20 fickle.out
	    while test "$(date +%s)" -le "$flip"; do sleep 0.2; done
	    applied MODIFIED 21 fickle.out | sed -n 1p | jq -c ".object.data.big |= sub(\"49\"; \"94\")"
	    # the input ends only once the retry after the backoff has rendered:
	    # ireconcile fires no timer after its input ends
	    test_wait_for 30 fickle_retried || :
	  ) >fickle.fifo & } &&
	test_ireconcile_fifo fickle --now 2026-11-22T10:00:00Z --backoff-base 1s fickle || return 1
	if test -f fickle.late; then
		echo "the first render came ${2}s or more after the start: trying again with a longer margin"
		return 2
	fi
}

for fickle in 'error("late")' '.parent.spec.color = "late"'
do
	test_expect_success "a render answer that cannot be had again leaves the child as it is ($fickle)" '
		for margin in 6 15 40; do
			fickle_run "$fickle" $margin && break
			test $? = 2 || return 1
		done &&
		{ ! test -f fickle.late || { echo "no margin was enough"; false; }; } &&
		! grep "\"op\":\"delete\"" fickle.out &&
		{ grep "render program .* on an input it rendered before" fickle.err >errors ||
		  { echo "no render error logged:"; tail -n 20 fickle.err; false; }; } &&
		jq -r .primary errors | sort -u >primaries &&
		echo blue/s1 >expect &&
		test_cmp expect primaries &&
		jq -c "select(.op == \"apply\" and .object.metadata.name == \"s1-0\") | .object.data.color" fickle.out >colors &&
		case $fickle in
		error*)	printf "%s\n" "\"red\"" >expect ;;
		*)	printf "%s\n" "\"red\"" "\"late\"" >expect ;;
		esac &&
		test_cmp expect colors
	'
done

test_done
