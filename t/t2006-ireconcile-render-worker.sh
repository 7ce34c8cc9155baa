#!/bin/sh
test_description='ireconcile: the render worker makes ahead of the first pass the answers this process would; one that fails, dies or is done leaves the rest to this process'
. "${0%/*}/test-lib.sh"

command -v ireconcile >/dev/null || test_skip_all 'ireconcile not built'

F="$PROJECT_ROOT/t/t2104-iotservice-ireconcile"
NOW=2026-11-22T10:05:00Z
OPERATOR_NAME=devawsk8s
export OPERATOR_NAME

# instance FIXTURE NAME: t2104's FIXTURE with example-iotservice renamed NAME, its lines before
# the bookmark in NAME.pre, those after it in NAME.post; without the related Secret of devawsk8s
# (pre.jsonl has it once) and the bookmark (post.jsonl starts with it)
instance () {
	n=$(grep -n "\"type\":\"BOOKMARK\"" "$F/$1.in.jsonl" | cut -d: -f1) &&
	jq -r --arg x "$2" --argjson n "$n" '
		[inputs] | to_entries[]
		| select(.value.type != "BOOKMARK" and
			 (.value.object.metadata.namespace != "devawsk8s" or .value.object.kind != "Secret"))
		| .value |= walk(if type == "string" then gsub("example-iotservice"; $x) else . end)
		| "\(if .key + 1 < $n then "pre" else "post" end) \(.value | tojson)"' \
		-n "$F/$1.in.jsonl" >"$2.both" &&
	sed -n "s/^pre //p" "$2.both" >"$2.pre" &&
	sed -n "s/^post //p" "$2.both" >"$2.post" &&
	test -s "$2.pre"
}

# canon FILE: its lines canonical and sorted (the order across primaries is the engine's)
canon () {
	jq -S -c -f "$TEST_DIRECTORY/normalize.jq" "$1" | sort
}

# ahead_at_least LOG N: ireconcile -v's LOG says N primaries or more were rendered ahead of the
# first pass, by either process
ahead_at_least () {
	test "$(grep -c "rendered ahead of the first pass" "$1")" -ge "$2"
}

# ahead_run NAME PROGRAM PRE N POST: ireconcile -v --once PROGRAM reads the file PRE, then,
# once N primaries are rendered ahead of the first pass, the file POST (NAME.out, NAME.err)
ahead_run () {
	mkfifo "$1.fifo" &&
	{ ( cat "$3"
	    test_wait_for 30 ahead_at_least "$1.err" "$4"
	    cat "$5"
	  ) >"$1.fifo" & } &&
	ireconcile -v --once --now $NOW "$2" <"$1.fifo" >"$1.out" 2>"$1.err" &&
	wait &&
	test_no_sanitizer_report "$1.err"
}

# ahead_here_at_least LOG N: the same, of those rendered by ireconcile itself
ahead_here_at_least () {
	test "$(grep -c "rendered ahead of the first pass (" "$1")" -ge "$2"
}

# worker_renders LOG: the answers of the render worker taken, from the last stats line of LOG
worker_renders () {
	jq -s "map(select(.msg? == \"stats\")) | last | .workerRenders" "$1"
}

# worker_pid LOG: the pid of the render worker ireconcile -v's LOG says it started (fails until then)
worker_pid () {
	sed -n "s/.*\"render worker \([0-9]*\) started\".*/\1/p" "$1" | grep .
}

# gone PID: no process PID (reaped)
gone () {
	! kill -0 "$1" 2>/dev/null
}

test_expect_success 'setup: twelve instances, at rest, edited, invalid, and without them the answer written alike' '
	for x in a b c d e f; do instance 04-steady "steady-$x" || return 1; done &&
	instance 05-edit-image edit-a && instance 05-edit-image edit-b &&
	instance 06-core core && instance 08-invalid invalid &&
	instance 01-namespace new-a && instance 07-prune prune &&
	{
		grep "\"name\":\"image-pull-secret\",\"namespace\":\"devawsk8s\"" "$F/04-steady.in.jsonl" &&
		cat ./*.pre
	} >pre.jsonl &&
	{
		grep "\"type\":\"BOOKMARK\"" "$F/04-steady.in.jsonl" &&
		cat ./*.post
	} >post.jsonl &&
	test $(grep -c "\"kind\":\"IoTService\"" pre.jsonl) = 12 &&
	cat pre.jsonl post.jsonl >in.jsonl &&
	ireconcile -v --once --no-render-worker --now $NOW "$PROJECT_ROOT/pipeline/iotservice" \
		<in.jsonl >ref.out 2>ref.err &&
	test_no_sanitizer_report ref.err &&
	test "$(worker_renders ref.err)" = 0 &&
	# (something to write: a render answer wrong or lost would show)
	test "$(jq -r .op ref.out | grep -c apply)" -ge 20 &&
	canon ref.out >ref.canon
'

test_expect_success 'answers rendered ahead by the worker: the same writes as without it' '
	ahead_run ahead "$PROJECT_ROOT/pipeline/iotservice" pre.jsonl 12 post.jsonl &&
	test "$(worker_renders ahead.err)" -ge 1 &&
	! grep "\"level\":\"warn\"" ahead.err | grep -q "render worker" &&
	canon ahead.out >actual &&
	test_cmp ref.canon actual
'

# (the events after the bookmark put before it: this process reads on after the first pass, and an
# edit read after its primary's reconcile would be reconciled again, with writes of its own)
test_expect_success 'the worker ends with the first pass, while this process goes on' '
	{ cat pre.jsonl && sed 1d post.jsonl && head -n 1 post.jsonl; } >done.jsonl &&
	ireconcile -v --once --no-render-worker --now $NOW "$PROJECT_ROOT/pipeline/iotservice" \
		<done.jsonl >done-ref.out 2>done-ref.err &&
	test "$(jq -r .op done-ref.out | grep -c apply)" -ge 20 &&
	mkfifo done.fifo &&
	{ ( cat done.jsonl
	    test_wait_for 30 test -f checked
	  ) >done.fifo & } &&
	{ ireconcile -v --settle 0 --status-interval 0 --now $NOW "$PROJECT_ROOT/pipeline/iotservice" \
		<done.fifo >done.out 2>done.err & } &&
	test_wait_for 30 grep -q "render worker done" done.err &&
	w=$(worker_pid done.err) &&
	test -n "$w" &&
	test_wait_for 10 gone "$w" &&
	# (the stats line it logs as it ends is not there yet)
	! grep -q "\"msg\":\"stats\"" done.err &&
	touch checked &&
	wait &&
	test_no_sanitizer_report done.err &&
	canon done-ref.out >expect &&
	canon done.out >actual &&
	test_cmp expect actual
'

# things N BAD [COLOR]: N Things t1..tN of namespace blue, tBAD's color "bad", the others' COLOR
# (default cI), then the bookmark
things () {
	jq -n -c --argjson n "$1" --argjson bad "$2" --arg color "${3:-}" '
		(range(1; $n + 1) as $i
		 | {type: "ADDED", object: {apiVersion: "test.example.org/v1", kind: "Thing",
		    metadata: {name: "t\($i)", namespace: "blue", uid: "uid-t\($i)", resourceVersion: "\(10 + $i)"},
		    spec: {color: (if $i == $bad then "bad" elif $color != "" then $color else "c\($i)" end)}}}),
		{type: "BOOKMARK", object: {kind: "Thing", apiVersion: "test.example.org/v1",
		 metadata: {resourceVersion: "100", annotations: {"k8s.io/initial-events-end": "true"}}}}'
}

# errors LOG: the messages of LOG's error lines, sorted
errors () {
	jq -r "select(.level? == \"error\") | .msg" "$1" | sort
}

test_expect_success 'a render that fails in the worker is made again by the first pass, which says why' '
	things 8 5 >colors.jsonl &&
	head -n 8 colors.jsonl >colors.pre && tail -n 1 colors.jsonl >colors.post &&
	ireconcile -v --once --no-render-worker --now $NOW "$FIXTURES/colors" <colors.jsonl \
		>colors-ref.out 2>colors-ref.err &&
	errors colors-ref.err >expect &&
	grep -q "no bad colors, t5" expect &&
	ahead_run colors "$FIXTURES/colors" colors.pre 7 colors.post &&
	errors colors.err >actual &&
	test_cmp expect actual &&
	# (the eight lines come in one write, so in one read: the four noted last, t8 to t5, are the
	# first sent to the worker)
	grep -q "the render worker.s render failed: .*no bad colors, t5" colors.err &&
	canon colors-ref.out >expect &&
	canon colors.out >actual &&
	test_cmp expect actual &&
	test "$(jq -r "select(.op == \"apply\") | .object.metadata.name" colors.out | sort | tr "\n" " ")" = \
		"t1-cm t2-cm t3-cm t4-cm t6-cm t7-cm t8-cm "
'

# taken_over NAME MESSAGE: NAME.err logs MESSAGE and no answer of the worker taken, and NAME.out
# holds the writes of the run without a worker (NAME-ref.out)
taken_over () {
	test_no_sanitizer_report "$1.err" &&
	grep -q "$2" "$1.err" &&
	test "$(worker_renders "$1.err")" = 0 &&
	canon "$1-ref.out" >expect &&
	canon "$1.out" >actual &&
	test_cmp expect actual
}

# ticks PID: the CPU time of process PID, in clock ticks
ticks () {
	sed "s/.*) //" "/proc/$1/stat" | awk "{ print \$12 + \$13 }"
}

# busy PID: process PID has had 0.2 s of CPU (a render of some 2 s under way)
busy () {
	test "$(ticks "$1")" -ge "$(( $(getconf CLK_TCK) / 5 ))"
}

test_expect_success 'a worker killed while it renders: this process renders what it held, the same writes' '
	things 2 0 slow >slow.jsonl &&
	head -n 2 slow.jsonl >slow.pre && tail -n 1 slow.jsonl >slow.post &&
	ireconcile -v --once --no-render-worker --now $NOW "$FIXTURES/colors" <slow.jsonl \
		>slow-ref.out 2>slow-ref.err &&
	test "$(jq -r "select(.op == \"apply\") | .object.metadata.name" slow-ref.out | sort | tr "\n" " ")" = \
		"t1-cm t2-cm " &&
	mkfifo slow.fifo &&
	{ ( cat slow.pre
	    test_wait_for 30 test -f killed
	    cat slow.post
	  ) >slow.fifo & } &&
	{ ireconcile -v --once --now $NOW "$FIXTURES/colors" <slow.fifo >slow.out 2>slow.err & } &&
	test_wait_for 30 worker_pid slow.err &&
	w=$(worker_pid slow.err) &&
	test_wait_for 30 busy "$w" &&
	kill -9 "$w" &&
	# (what it held is noted again, and rendered ahead here: ireconcile waits for no more input)
	test_wait_for 60 ahead_here_at_least slow.err 2 &&
	touch killed &&
	wait &&
	# (killed within its first render: nothing of it was taken)
	taken_over slow "the render worker ended before its work was done"
'

# Requests larger than the pipe holds (a spec of 200 KB each, four on their way): what is not
# written yet is, while the first pass waits for their answers.
test_expect_success 'render inputs larger than the pipe: written as the worker reads them, the same writes' '
	things 6 0 >big.jsonl &&
	jq -c "if .type == \"ADDED\" then .object.spec.pad = (\"x\" * 200000) else . end" big.jsonl >big-pad.jsonl &&
	ireconcile -v --once --no-render-worker --now $NOW "$FIXTURES/colors" <big-pad.jsonl >big-ref.out 2>big-ref.err &&
	ireconcile -v --once --now $NOW "$FIXTURES/colors" <big-pad.jsonl >big.out 2>big.err &&
	test_no_sanitizer_report big.err &&
	! grep "\"level\":\"warn\"" big.err | grep -q "render worker" &&
	canon big-ref.out >expect &&
	canon big.out >actual &&
	test_cmp expect actual &&
	test "$(jq -r "select(.op == \"apply\") | .object.metadata.name" big.out | wc -l)" = 6 &&
	# (the first of those sent is waited for by the first pass)
	test "$(worker_renders big.err)" -ge 1
'

# A worker stopped (SIGSTOP) before it reads anything: the first pass waits 250 ms for the
# answer it should be making, then renders everything here without waiting again.
test_expect_success 'a worker that stalls: after 250 ms this process renders what it held, the same writes' '
	things 4 0 >stall.jsonl &&
	head -n 4 stall.jsonl >stall.pre && tail -n 1 stall.jsonl >stall.post &&
	ireconcile -v --once --no-render-worker --now $NOW "$FIXTURES/colors" <stall.jsonl \
		>stall-ref.out 2>stall-ref.err &&
	mkfifo stall.fifo &&
	{ ( test_wait_for 30 test -f stopped
	    cat stall.pre stall.post
	  ) >stall.fifo & } &&
	{ ireconcile -v --once --now $NOW "$FIXTURES/colors" <stall.fifo >stall.out 2>stall.err & } &&
	test_wait_for 30 worker_pid stall.err &&
	kill -STOP "$(worker_pid stall.err)" &&
	touch stopped &&
	wait &&
	taken_over stall "the first pass has waited 250 ms for the render worker: it renders without waiting for it from now on" &&
	test "$(grep -c "has waited 250 ms" stall.err)" = 1
'

# A worker slower than the first pass (each render some 0.15 s, and none made ahead): the pass
# waits for its answers 250 ms in all, not for each, then renders the rest here.
test_expect_success 'a slow worker: the first pass waits 250 ms for it in all, then renders the rest here' '
	things 8 0 medium >medium.jsonl &&
	ireconcile -v --once --no-render-worker --now $NOW "$FIXTURES/colors" <medium.jsonl \
		>medium-ref.out 2>medium-ref.err &&
	ireconcile -v --once --now $NOW "$FIXTURES/colors" <medium.jsonl >medium.out 2>medium.err &&
	test_no_sanitizer_report medium.err &&
	test "$(grep -c "has waited 250 ms for the render worker" medium.err)" = 1 &&
	test "$(worker_renders medium.err)" -lt 8 &&
	canon medium-ref.out >expect &&
	canon medium.out >actual &&
	test_cmp expect actual
'

test_done
