#!/bin/sh
test_description='ireconcile: live input (a FIFO held open): timed requeues, backoff, feedback, in-flight memory'
. "${0%/*}/test-lib.sh"

NOW=2026-11-22T10:00:00Z

test_expect_success 'setup' '
	mkdir prog &&
	cp -R "$PROJECT_ROOT/t/t2001-ireconcile-engine/widgets" prog/ &&
	cp -R "$PROJECT_ROOT/pipeline/lib" prog/lib
'

# Starts ireconcile on FIFOs: fd 5 writes its stdin, fd 6 its feedback.
start_live () {
	rm -f in fb out err &&
	mkfifo in fb &&
	{ WIDGET_TEAM=blue timeout 30 ireconcile --now $NOW --feedback fb "$@" "${LIVE_PROG:-prog/widgets}" <in >out 2>err & } &&
	pid=$! &&
	exec 5>in &&
	test_wait_for 5 test -p fb &&
	exec 6<>fb
}

# Ends its input; it must exit 0 by itself.
stop_live () {
	exec 5>&- 6>&- &&
	wait $pid
}

# The number of output lines matching a jq condition.
count () {
	jq -c "select($1)" <out | wc -l
}

logs () {
	jq -c "select($1)" <err | wc -l
}

# For test_wait_for, which runs a command each time: at least N lines.
count_ge () {
	test "$(count "$2")" -ge "$1"
}

logs_ge () {
	test "$(logs "$2")" -ge "$1"
}

# Feeds the widget as stored with the last status ireconcile wrote (the watch showing it).
store_status () {
	st=$(jq -c "select(.op == \"status\") | .object.status" <out | tail -n 1) &&
	jq -c --argjson st "$st" ".object.status = \$st" "$FIXTURES/status-written.jsonl" >&5
}

# The errors of the last status written are JSON (as compact jq prints them).
last_errors_are () {
	jq -c "select(.op == \"status\") | .object.status.errors" <out | tail -n 1 >errors &&
	echo "$1" >expect &&
	test_cmp expect errors
}

test_expect_success 'resyncAfterSeconds reconciles again without a new event' '
	start_live -v &&
	cat "$FIXTURES/resync.jsonl" >&5 &&
	test_wait_for 10 logs_ge 4 ".primary == \"blue/w1\" and .applies == 0" &&
	stop_live &&
	! test -s out &&
	test_no_sanitizer_report err
'

test_expect_success 'a program error backs off per primary, exponentially and capped' '
	start_live --backoff-base 100ms --backoff-cap 400ms &&
	cat "$FIXTURES/backoff.jsonl" >&5 &&
	test_wait_for 10 logs_ge 5 ".primary == \"blue/w2\" and .level == \"error\"" &&
	stop_live &&
	jq -r "select(.primary == \"blue/w2\") | .retryInMs" <err >delays &&
	head -n 1 delays >first && sed -n 3p delays >third &&
	test $(cat first) -ge 100 && test $(cat first) -lt 150 &&
	test $(cat third) -ge 400 &&
	sed -n "3,\$p" delays >capped &&
	while read d; do test $d -lt 600 || return 1; done <capped &&
	grep "unable to reconcile .blue/w2.: spec.fail is set" err &&
	! grep "blue/w1" out
'

test_expect_success 'an apply in flight is not repeated; feedback failures reach .errors without a loop' '
	start_live --backoff-base 2s --backoff-cap 2s &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cat "$FIXTURES/pod.jsonl" >&5 &&
	sleep 0.3 &&
	test "$(count ".op == \"apply\"")" -eq 2 &&
	test "$(wc -l <out)" -eq 2 &&
	echo "{\"op\":\"result\",\"for\":\"apply\",\"primary\":\"blue/w1\",\"ref\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"blue-w1\",\"name\":\"color\"},\"ok\":false,\"code\":422,\"reason\":\"Invalid\",\"message\":\"data: bad\"}" >&6 &&
	test_wait_for 5 count_ge 1 ".op == \"status\"" &&
	jq -c "select(.op == \"status\") | .object.status.errors" <out >errors &&
	echo "[\"apply ConfigMap/color: 422 Invalid\"]" >expect &&
	test_cmp expect errors &&
	cat "$FIXTURES/status-written.jsonl" >&5 &&
	sleep 0.5 &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 1 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\" and .object.kind == \"ConfigMap\"" &&
	sleep 0.3 &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 2 &&
	test "$(count ".op == \"status\"")" -eq 1 &&
	echo "{\"op\":\"result\",\"for\":\"apply\",\"primary\":\"blue/w1\",\"ref\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"blue-w1\",\"name\":\"color\"},\"ok\":true,\"code\":200,\"resourceVersion\":\"31\"}" >&6 &&
	test_wait_for 5 count_ge 2 ".op == \"status\"" &&
	last_errors_are "[]" &&
	cat "$FIXTURES/cm-live.jsonl" >&5 &&
	sleep 0.3 &&
	stop_live &&
	test "$(count ".op == \"apply\"")" -eq 3 &&
	test_no_sanitizer_report err
'

# The ConfigMap an apply made, as a watch shows it: resourceVersion RV, its palette P (the desired
# one is "none": any other is what the server made of the apply, or a later write).
cm_live () {
	sed -n 1p "$FIXTURES/cm-live.jsonl" | jq -c --arg rv "$1" --arg p "$2" \
		'.object.metadata.resourceVersion = $rv | .object.data.palette = $p'
}

# kapply's result of the ConfigMap's apply number N (1: the first ireconcile wrote), its answer at
# resourceVersion RV: the apply's tag given back, and EXTRA members.
cm_result () { # N RV [EXTRA-JSON]
	tag=$(jq -r "select(.op == \"apply\" and .object.kind == \"ConfigMap\") | .tag" <out | sed -n "$1p") &&
	test -n "$tag" &&
	echo "{\"op\":\"result\",\"for\":\"apply\",\"primary\":\"blue/w1\",\"tag\":\"$tag\",\"ref\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"blue-w1\",\"name\":\"color\"},\"ok\":true,\"code\":200,\"resourceVersion\":\"$2\"${3:+,$3}}"
}

# How many reconciles of blue/w1 ireconcile logged (-v).
reconciled () {
	logs ".msg == \"reconciled 'blue/w1'\""
}

# At least N of them: a reconcile logs once its output is written, so a test
# that saw that output waits for its line before counting from it.
reconciled_ge () {
	test "$(reconciled)" -ge "$1"
}

# The widget edited to blue: the ConfigMap desired anew.
edit_blue () {
	sed -n 1p "$FIXTURES/create.jsonl" |
		jq -c ".type = \"MODIFIED\" | .object.metadata.resourceVersion = \"12\" | .object.spec.color = \"blue\""
}

# Starts ireconcile with "$@" (start_live); the widget created, then edited to blue: the blue
# ConfigMap's apply written and its reconcile logged.
start_blue () {
	start_live "$@" &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	edit_blue >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"apply\" and .object.data.color == \"blue\"" &&
	test_wait_for 5 reconciled_ge 2
}

blue () { # how many applies of the blue ConfigMap ireconcile wrote
	count ".op == \"apply\" and .object.data.color == \"blue\""
}

# The blue ConfigMap as its apply was answered, at resourceVersion RV, its palette P.
cm_live_blue () {
	jq -c --arg rv "$1" --arg p "$2" "select(.op == \"apply\" and .object.data.color == \"blue\") | .object
		| .metadata.resourceVersion = \$rv | .metadata.uid = \"uid-cm-w1-color\" | .data.palette = \$p
		| {type: \"MODIFIED\", object: .}" <out | head -n 1
}

# Lines L of cm-live.jsonl seen (the objects ireconcile wrote, as applied): the status written
# next reports no failure any more; ireconcile stopped.
seen_then_cleared () {
	sed -n "$1p" "$FIXTURES/cm-live.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"status\"" &&
	stop_live &&
	last_errors_are "[]"
}

# A failed result of the ConfigMap's apply number N.
cm_failed () {
	tag=$(jq -r "select(.op == \"apply\" and .object.kind == \"ConfigMap\") | .tag" <out | sed -n "$1p") &&
	test -n "$tag" &&
	echo "{\"op\":\"result\",\"for\":\"apply\",\"primary\":\"blue/w1\",\"tag\":\"$tag\",\"ref\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"blue-w1\",\"name\":\"color\"},\"ok\":false,\"code\":500,\"reason\":\"InternalError\",\"message\":\"etcd timeout\",\"transient\":true}"
}

test_expect_success 'the object an apply answered with holds it uncompared; a later write is compared' '
	start_live -v &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_result 1 41 >&6 &&
	test_wait_for 5 reconciled_ge 1 &&
	n=$(reconciled) &&
	{ cm_live 41 mutated && sed -n 2p "$FIXTURES/cm-live.jsonl"; } >&5 &&
	test_wait_for 5 logs_ge $((n + 1)) ".msg == \"reconciled '"'"'blue/w1'"'"'\"" &&
	sleep 0.3 &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 1 &&
	cm_live 42 edited >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\" and .object.kind == \"ConfigMap\"" &&
	stop_live &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 2 &&
	test_no_sanitizer_report err
'

test_expect_success 'a dry run'"'"'s answer is not taken for the object: it is compared' '
	start_live -v &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_result 1 41 "\"dryRun\":\"server\"" >&6 &&
	{ cm_live 41 mutated && sed -n 2p "$FIXTURES/cm-live.jsonl"; } >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\" and .object.kind == \"ConfigMap\"" &&
	stop_live &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 2 &&
	test_no_sanitizer_report err
'

# The namespace seen again, annotated with N: a change that reconciles, and nothing to apply.
ns_touched () {
	sed -n 2p "$FIXTURES/cm-live.jsonl" |
		jq -c --arg n "$1" '.type = "MODIFIED" | .object.metadata.resourceVersion = "\(60 + ($n | tonumber))"
			| .object.metadata.annotations.touched = $n'
}

# The object an apply was answered with, and a controller's write of its status (as ksim's and
# kube-controller-manager's come at once), read together: the object differs from the one
# answered but for its status, so it holds the apply as that one did (what the server made of
# it, a palette here), without a comparison that would find the palette changed and write again.
test_expect_success 'an apply answered with a version since written in its status alone: held uncompared' '
	start_live -v &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_result 1 41 >&6 &&
	{ cm_live 41 none && sed -n 2p "$FIXTURES/cm-live.jsonl"; } >&5 &&
	test_wait_for 5 reconciled_ge 2 &&
	edit_blue >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"apply\" and .object.data.color == \"blue\"" &&
	cm_result 2 45 >&6 &&
	test_wait_for 5 logs_ge 1 ".msg | test(\"apply of .* answered with resourceVersion 45\")" &&
	n=$(reconciled) &&
	{ cm_live_blue 45 mutated && cm_live_blue 47 mutated | jq -c ".object.status = {\"by\": \"a controller\"}"
	} >both.jsonl &&
	cat both.jsonl >&5 &&
	test_wait_for 5 logs_ge $((n + 1)) ".msg == \"reconciled '"'"'blue/w1'"'"'\"" &&
	ns_touched 1 >&5 &&
	test_wait_for 5 logs_ge $((n + 2)) ".msg == \"reconciled '"'"'blue/w1'"'"'\"" &&
	stop_live &&
	test "$(blue)" -eq 1 &&
	test_no_sanitizer_report err
'

# An apply is in flight until its object is seen back; once both its answer and the object at the
# answer's resourceVersion are in, it is not kept until the next reconcile. The answer first: the
# object ends it as it comes, and holds the apply, what the server made of it (a palette the server
# set): the reconciles after write nothing.
test_expect_success 'an apply'"'"'s answer, then its object: no longer in flight as it comes' '
	start_live -v &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_result 1 41 >&6 &&
	test_wait_for 5 logs_ge 1 ".msg | test(\"apply of .* answered with resourceVersion 41\")" &&
	test "$(logs ".msg | test(\"no longer in flight\")")" -eq 0 &&
	{ cm_live 41 mutated && sed -n 2p "$FIXTURES/cm-live.jsonl"; } >&5 &&
	test_wait_for 5 logs_ge 1 ".msg | test(\"color. is at the resourceVersion its apply was answered with .41.: no longer in flight\")" &&
	test_wait_for 5 reconciled_ge 2 &&
	ns_touched 1 >&5 &&
	test_wait_for 5 reconciled_ge 3 &&
	stop_live &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 1 &&
	test_no_sanitizer_report err
'

# The object first, while its primary waits for the namespace created with it (no reconcile in
# between): the answer ends it as it comes.
test_expect_success 'an object, then its apply'"'"'s answer: no longer in flight as it comes' '
	start_live -v &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_live 41 none >&5 &&
	sleep 0.3 &&
	cm_result 1 41 >&6 &&
	test_wait_for 5 logs_ge 1 ".msg | test(\"color. is at the resourceVersion its apply was answered with .41.: no longer in flight\")" &&
	test "$(reconciled)" -eq 1 &&
	sed -n 2p "$FIXTURES/cm-live.jsonl" >&5 &&
	test_wait_for 5 reconciled_ge 2 &&
	stop_live &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 1 &&
	test_no_sanitizer_report err
'

test_expect_success 'the late success of an earlier apply is not taken for the latest one'"'"'s' '
	start_blue -v --backoff-base 300ms --backoff-cap 300ms &&
	cm_result 1 41 >&6 &&
	n=$(reconciled) &&
	{ cm_live 41 none && sed -n 2p "$FIXTURES/cm-live.jsonl"; } >&5 &&
	test_wait_for 5 logs_ge $((n + 1)) ".msg == \"reconciled '"'"'blue/w1'"'"'\"" &&
	test "$(blue)" -eq 2 &&
	cm_failed 3 >&6 &&
	test_wait_for 5 count_ge 3 ".op == \"apply\" and .object.data.color == \"blue\"" &&
	stop_live &&
	test_no_sanitizer_report err
'

test_expect_success 'the late failure of an earlier apply is not the latest one'"'"'s' '
	start_blue -v --backoff-base 300ms --backoff-cap 300ms &&
	cm_failed 1 >&6 &&
	cm_result 2 42 >&6 &&
	n=$(reconciled) &&
	cm_live_blue 42 mutated >&5 &&
	test_wait_for 5 logs_ge $((n + 1)) ".msg == \"reconciled '"'"'blue/w1'"'"'\"" &&
	sleep 0.6 &&
	test "$(blue)" -eq 1 &&
	stop_live &&
	test "$(jq -c "select(.op == \"status\") | .object.status.errors | select(length > 0)" <out | wc -l)" -eq 0 &&
	test_no_sanitizer_report err
'

# The blue apply's object seen before the red one's failure comes (kstatus was slow to pass it on):
# the apply in flight is held and forgotten, and the failure is no longer anyone's.
test_expect_success 'the failure of an apply no longer in flight is not reported' '
	start_blue -v --backoff-base 300ms --backoff-cap 300ms &&
	n=$(reconciled) &&
	cm_live_blue 42 none >&5 &&
	test_wait_for 5 logs_ge $((n + 1)) ".msg == \"reconciled '"'"'blue/w1'"'"'\"" &&
	cm_failed 1 >&6 &&
	test_wait_for 5 logs_ge 1 ".msg | test(\"feedback line 1: the failure of an apply of .* no longer in flight\")" &&
	sleep 0.6 &&
	stop_live &&
	test "$(blue)" -eq 1 &&
	test "$(jq -c "select(.op == \"status\") | .object.status.errors | select(length > 0)" <out | wc -l)" -eq 0 &&
	test_no_sanitizer_report err
'

# The apply failed (a timeout on its way back, say) but landed: once the live object is seen to hold
# it, the failure is dropped and the status says so, with no apply again.
test_expect_success 'a failed apply whose object is then seen holding it is no longer reported' '
	start_live -v --backoff-base 3s --backoff-cap 3s &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_failed 1 >&6 &&
	test_wait_for 5 count_ge 1 ".op == \"status\"" &&
	last_errors_are "[\"apply ConfigMap/color: 500 InternalError\"]" &&
	store_status &&
	seen_then_cleared 1,2 &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 1 &&
	test_no_sanitizer_report err
'

# The same, the apply sent again after the backoff before the object is seen: the retry is found
# held as the pending applies are looked at, and the children's applies meet it remembered.
test_expect_success 'a failed apply sent again, then seen held, is no longer reported' '
	start_live -v --backoff-base 300ms --backoff-cap 300ms &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_failed 1 >&6 &&
	test_wait_for 5 count_ge 1 ".op == \"status\"" &&
	store_status &&
	test_wait_for 5 count_ge 2 ".op == \"apply\" and .object.kind == \"ConfigMap\"" &&
	seen_then_cleared 1,2 &&
	test "$(count ".op == \"apply\" and .object.kind == \"ConfigMap\"")" -eq 2 &&
	test_no_sanitizer_report err
'

# The same for a create (adopt: false), which carries no tag: the object seen holding ours is ours.
test_expect_success 'a failed create whose object is then seen holding it is no longer reported' '
	cp -R prog/widgets prog/adopt &&
	sed "s/^  - {resource: namespaces, apiVersion: v1, kind: Namespace}\$/  - {resource: namespaces, apiVersion: v1, kind: Namespace, adopt: false}/" \
		prog/widgets/program.yml >prog/adopt/program.yml &&
	grep -q "adopt: false" prog/adopt/program.yml &&
	LIVE_PROG=prog/adopt start_live -v --backoff-base 3s --backoff-cap 3s &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"create\"" &&
	echo "{\"op\":\"result\",\"for\":\"create\",\"primary\":\"blue/w1\",\"ref\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"name\":\"blue-w1\"},\"ok\":false,\"code\":500,\"reason\":\"InternalError\",\"message\":\"etcd timeout\"}" >&6 &&
	test_wait_for 5 count_ge 1 ".op == \"status\"" &&
	last_errors_are "[\"create Namespace/blue-w1: 500 InternalError\"]" &&
	store_status &&
	seen_then_cleared 2 &&
	test "$(count ".op == \"create\"")" -eq 1 &&
	test_no_sanitizer_report err
'

# prog/fallback: widgets, its ConfigMap red while an apply of it has failed.
make_fallback () {
	rm -rf prog/fallback &&
	cp -R prog/widgets prog/fallback &&
	sed -e "s/^| running_pods as \$pods\$/&\n| (if any(.errors[]; .op == \"apply\" and .ref.kind == \"ConfigMap\") then \"red\" else \$w.spec.color end) as \$color/" \
		-e "s/data: {color: \$w.spec.color,/data: {color: \$color,/" \
		-e "s/hash: (\$w.spec.color | md5),/hash: (\$color | md5),/" prog/widgets/sync.jq >prog/fallback/sync.jq &&
	test "$(grep -c "\$color" prog/fallback/sync.jq)" = 3
}

# A program that falls back to red while an apply of its ConfigMap fails: blue is refused, red is
# live and held, and the failure of blue is what it falls back on. It stays reported, and blue is not
# applied again before the backoff (it was at once, every time the failure was cleared).
test_expect_success 'a failure is not cleared by the object held being another than the one that failed' '
	make_fallback &&
	LIVE_PROG=prog/fallback start_live -v --backoff-base 3s --backoff-cap 3s &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	test_wait_for 5 reconciled_ge 1 &&
	sed -n 1,2p "$FIXTURES/cm-live.jsonl" >&5 &&
	test_wait_for 5 reconciled_ge 2 &&
	edit_blue >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"apply\" and .object.data.color == \"blue\"" &&
	test_wait_for 5 reconciled_ge 3 &&
	cm_failed 2 >&6 &&
	test_wait_for 5 reconciled_ge 4 &&
	sleep 1 &&
	stop_live &&
	test "$(blue)" -eq 1 &&
	last_errors_are "[\"apply ConfigMap/color: 500 InternalError\"]" &&
	test_no_sanitizer_report err
'

# The same program, the red ConfigMap not live: red is applied and succeeds while blue is refused.
# Red's success is not blue's: blue's failure stays, and blue is not applied again at once.
test_expect_success 'a failure is not cleared by the success of another object' '
	make_fallback &&
	LIVE_PROG=prog/fallback start_live -v --backoff-base 3s --backoff-cap 3s &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_result 1 41 >&6 &&
	edit_blue >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"apply\" and .object.data.color == \"blue\"" &&
	cm_failed 2 >&6 &&
	test_wait_for 5 count_ge 3 ".op == \"apply\" and .object.kind == \"ConfigMap\"" &&
	test "$(count ".op == \"apply\" and .object.data.color == \"red\"")" -eq 2 &&
	cm_result 3 43 >&6 &&
	sleep 1 &&
	stop_live &&
	test "$(blue)" -eq 1 &&
	last_errors_are "[\"apply ConfigMap/color: 500 InternalError\"]" &&
	test_no_sanitizer_report err
'

# A failure without a tag (from a writer that gives none back) cannot be told apart: any success
# of the object's apply clears it.
test_expect_success 'a failure without a tag is cleared by a success of the apply' '
	start_live --backoff-base 3s --backoff-cap 3s &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_failed 1 | jq -c "del(.tag)" >&6 &&
	test_wait_for 5 count_ge 1 ".op == \"status\"" &&
	store_status &&
	cm_result 1 41 >&6 &&
	test_wait_for 5 count_ge 2 ".op == \"status\"" &&
	stop_live &&
	jq -c "select(.op == \"status\") | .object.status.errors" <out >errors &&
	printf "%s\n" "[\"apply ConfigMap/color: 500 InternalError\"]" "[]" >expect &&
	test_cmp expect errors
'

# What the program is given of a failure: the result's members, never the tag kept with it.
test_expect_success '.errors holds op, ref, code, reason and message' '
	cp -R prog/widgets prog/errkeys &&
	sed "s/errors: \[.errors\[\] | .*\]}/errors: [.errors[] | keys | join(\",\")]}/" prog/widgets/sync.jq \
		>prog/errkeys/sync.jq &&
	grep -q "keys | join" prog/errkeys/sync.jq &&
	LIVE_PROG=prog/errkeys start_live &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	cm_failed 1 >&6 &&
	test_wait_for 5 count_ge 1 ".op == \"status\"" &&
	stop_live &&
	last_errors_are "[\"code,message,op,reason,ref\"]"
'

test_expect_success 'the end of stdin reconciles what is pending, then exits 0' '
	start_live &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	stop_live &&
	test "$(count ".op == \"apply\"")" -eq 2
'

test_expect_success '--stats-interval logs counters for the supervisor' '
	start_live --stats-interval 200ms &&
	cat "$FIXTURES/backoff.jsonl" >&5 &&
	test_wait_for 10 logs_ge 3 ".msg == \"stats\" and .synced" &&
	stop_live &&
	jq -c "select(.msg == \"stats\" and .synced) | [.primaries, .objects, (.reconciles >= 2), (.programErrors >= 1), .queue]" \
		<err | tail -n 1 >stats &&
	echo "[2,4,true,true,0]" >expect &&
	test_cmp expect stats
'

test_expect_success 'a full stdout pipe does not stop the feedback from being read (no cycle deadlock)' '
	rm -f in fb outp && mkfifo in fb outp &&
	jq -c "select(.object.kind == \"Widget\") | range(0; 300) as \$i | .object.metadata.name = \"w\(\$i)\"" \
		<"$FIXTURES/create.jsonl" >many.jsonl &&
	tail -n 1 "$FIXTURES/create.jsonl" >>many.jsonl &&
	for i in $(seq 1 3000); do
		echo "{\"op\":\"result\",\"for\":\"apply\",\"primary\":\"blue/none\",\"ref\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"none\",\"name\":\"c$i\"},\"ok\":true,\"code\":200}"
	done >results.jsonl &&
	{ WIDGET_TEAM=blue timeout 60 ireconcile --now $NOW --feedback fb prog/widgets <in >outp 2>err & } &&
	pid=$! &&
	exec 5>in 8<outp &&
	test_wait_for 5 test -p fb &&
	exec 6<>fb &&
	cat many.jsonl >&5 &&
	sleep 0.5 &&
	timeout 20 cat results.jsonl >&6 &&
	{ cat <&8 >out 5>&- 6>&- & } &&
	catpid=$! &&
	exec 5>&- 6>&- 8<&- &&
	wait $pid &&
	wait $catpid &&
	test "$(count ".op == \"apply\"")" -eq 600 &&
	test_no_sanitizer_report err
'

test_expect_success '--once exits after the first full reconcile, stdin still open' '
	rm -f in2 && mkfifo in2 &&
	{ WIDGET_TEAM=blue timeout 30 ireconcile --once --now $NOW prog/widgets <in2 >once.out 2>once.err & } &&
	pid=$! &&
	exec 7>in2 &&
	cat "$FIXTURES/create.jsonl" >&7 &&
	wait $pid &&
	exec 7>&- &&
	test "$(jq -c "select(.op == \"apply\")" <once.out | wc -l)" -eq 2
'

# --settle: a burst of changes of observed objects (pods) reconciles once,
# --settle after its last change, SETTLE_CAP (5) --settles after its first
# at the latest; a reconcile meanwhile (a child's change) holds the status
# the pods make until then.

# Pod NAME of w1, Running, as a watch shows it at resourceVersion RV.
pod_running () {
	sed -n 1p "$FIXTURES/pod.jsonl" | jq -c --arg n "$1" --arg rv "$2" \
		'.object.metadata.name = $n | .object.metadata.uid = "uid-\($n)"
		 | .object.metadata.resourceVersion = $rv | .object.status.phase = "Running"'
}

# start_live with --settle D (and no --status-interval); the widget created,
# its applies written; lines: how many lines out holds then.
start_settling () {
	start_live -v --settle "$1" --status-interval 0 &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	sleep 0.3 &&
	lines=$(wc -l <out)
}

# The pods of each status written after the first N lines of out.
statuses_after () {
	tail -n +$(($1 + 1)) out | jq -c 'select(.op == "status") | .object.status.pods'
}

test_expect_success '--settle: pods coming 1.2 s apart reconcile once, 2 s after the last' '
	start_settling 2s &&
	pod_running w1-a 40 >&5 &&
	sleep 1.2 &&
	pod_running w1-b 41 >&5 &&
	sleep 1.2 &&
	pod_running w1-c 42 >&5 &&
	test_wait_for 10 count_ge 1 ".op == \"status\" and (.object.status.pods | length) == 3" &&
	sleep 2.5 &&
	stop_live &&
	statuses_after $lines >actual &&
	echo "[\"w1-a\",\"w1-b\",\"w1-c\"]" >expect &&
	test_cmp expect actual &&
	test_no_sanitizer_report err
'

test_expect_success '--settle: a child seen meanwhile reconciles at once, and writes a status that changes the phase' '
	start_settling 5s &&
	pod_running w1-a 40 >&5 &&
	sleep 0.2 &&
	cat "$FIXTURES/cm-live.jsonl" >&5 &&
	test_wait_for 3 count_ge 1 ".op == \"status\" and .object.status.phase == \"Ready\"" &&
	sleep 5.5 &&
	stop_live &&
	statuses_after $lines >actual &&
	echo "[\"w1-a\"]" >expect &&
	test_cmp expect actual &&
	test_no_sanitizer_report err
'

test_expect_success '... and holds one that only lists pods until they settle' '
	start_live -v --settle 2s --status-interval 0 &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	pod_running w1-a 40 >&5 &&
	test_wait_for 10 count_ge 1 ".op == \"status\" and .object.status.pods == [\"w1-a\"]" &&
	n=$(reconciled) &&
	store_status &&
	: its landing, as the program was told when it was written: not reconciled &&
	test_wait_for 5 grep -q "as its last reconcile saw it; not reconciled" err &&
	test "$(reconciled)" = "$n" &&
	lines=$(wc -l <out) &&
	n=$(reconciled) &&
	pod_running w1-b 41 >&5 &&
	sleep 0.2 &&
	cat "$FIXTURES/cm-live.jsonl" >&5 &&
	test_wait_for 5 reconciled_ge $((n + 1)) &&
	statuses_after $lines >early &&
	test_wait_for 10 count_ge 1 ".op == \"status\" and .object.status.pods == [\"w1-a\",\"w1-b\"]" &&
	stop_live &&
	! test -s early &&
	statuses_after $lines >actual &&
	echo "[\"w1-a\",\"w1-b\"]" >expect &&
	test_cmp expect actual &&
	test_no_sanitizer_report err
'

# prog/nsphase: widgets whose status also says its Namespace's phase (the
# Namespace projected to it: a child whose status the program reads).
make_nsphase () {
	rm -rf prog/nsphase &&
	cp -R prog/widgets prog/nsphase &&
	sed "s/^  - {resource: namespaces, apiVersion: v1, kind: Namespace}\$/  - {resource: namespaces, apiVersion: v1, kind: Namespace, project: [metadata.labels, status.phase]}/" \
		prog/widgets/program.yml >prog/nsphase/program.yml &&
	sed "s/^    status: ({phase: \$phase, pods: \$pods,/    status: ({phase: \$phase, pods: \$pods, ns: ([.children[\"Namespace.v1\"][] | .status.phase][0]),/" \
		prog/widgets/sync.jq >prog/nsphase/sync.jq &&
	grep -q "project: \[metadata.labels, status.phase\]" prog/nsphase/program.yml &&
	grep -q "ns: (" prog/nsphase/sync.jq
}

# The Namespace ireconcile applied, as a watch shows it at resourceVersion RV
# (50: ADDED) with status.phase PHASE; jq filter F (default .) applied to the object.
ns_live () {
	jq -c --arg rv "$1" --arg ph "$2" "select(.op == \"apply\" and .object.kind == \"Namespace\") | .object
		| .metadata.uid = \"uid-ns-w1\" | .metadata.resourceVersion = \$rv | .status.phase = \$ph
		| ${3:-.} | {type: (if \$rv == \"50\" then \"ADDED\" else \"MODIFIED\" end), object: .}" <out | head -n 1
}

# start_ns_live PROG: PROG live (--settle 2s), the widget created, its Namespace seen Active
# and its status written; n: how many reconciles then.
start_ns_live () {
	LIVE_PROG=$1 start_live -v --settle 2s --status-interval 0 &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	ns_live 50 Active >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"status\" and .object.status.ns == \"Active\"" &&
	sleep 0.3 &&
	n=$(reconciled)
}

test_expect_success '--settle: a child whose status alone changed (what the program reads of it) settles like a pod; a drift of it does not' '
	make_nsphase &&
	start_ns_live prog/nsphase &&
	ns_live 51 Terminating >&5 &&
	sleep 1 &&
	test "$(reconciled)" -eq $n &&
	test_wait_for 5 count_ge 1 ".op == \"status\" and .object.status.ns == \"Terminating\"" &&
	test "$(reconciled)" -eq $((n + 1)) &&
	a=$(count ".op == \"apply\" and .object.kind == \"Namespace\"") &&
	ns_live 52 Active ".metadata.annotations[\"iot-operator/applied\"] = \"0\"" >&5 &&
	test_wait_for 1 count_ge $((a + 1)) ".op == \"apply\" and .object.kind == \"Namespace\"" &&
	stop_live &&
	test_no_sanitizer_report err
'

# prog/nsignore: prog/nsphase, its Namespace's example.org/rev annotation ignored.
make_nsignore () {
	make_nsphase &&
	rm -rf prog/nsignore && cp -R prog/nsphase prog/nsignore &&
	sed -i "s/project: \[metadata.labels, status.phase\]}\$/project: [metadata.labels, status.phase], ignore: [[metadata, annotations, example.org\/rev]]}/" \
		prog/nsignore/program.yml &&
	grep -q "ignore: \[\[metadata, annotations, example.org/rev\]\]" prog/nsignore/program.yml
}

test_expect_success 'ignore: a change of an ignored field alone reconciles nothing; of another field, at once' '
	make_nsignore &&
	start_ns_live prog/nsignore &&
	ns_live 51 Active ".metadata.annotations[\"example.org/rev\"] = \"2\"" >&5 &&
	sleep 2.5 &&
	test "$(reconciled)" -eq $n &&
	ns_live 52 Active ".metadata.annotations[\"example.org/rev\"] = \"2\" | .metadata.annotations[\"example.org/other\"] = \"x\"" >&5 &&
	test_wait_for 1 reconciled_ge $((n + 1)) &&
	stop_live &&
	test_no_sanitizer_report err
'

test_expect_success 'ignore: a desired child that sets an ignored field is a program error, named' '
	make_nsignore &&
	sed -i "s/{apiVersion: \"v1\", kind: \"Namespace\", metadata: {name: \$ns}}/{apiVersion: \"v1\", kind: \"Namespace\", metadata: {name: \$ns, annotations: {\"example.org\/rev\": \"1\"}}}/" \
		prog/nsignore/sync.jq &&
	grep -q "example.org/rev" prog/nsignore/sync.jq &&
	WIDGET_TEAM=blue ireconcile --now $NOW --once prog/nsignore <"$FIXTURES/create.jsonl" >setsign.out 2>setsign.err;
	test_no_sanitizer_report setsign.err &&
	jq -r "select(.level == \"error\") | .msg" setsign.err >msgs &&
	grep "desired Namespace .blue-w1. (child 0) sets metadata.annotations.example\\\\.org/rev, which program .widgets. says it never sets (program.yml: ignore)" msgs &&
	! grep -q "\"op\":\"apply\"" setsign.out
'

test_expect_success 'a status write that failed is written again after its backoff, not held for --status-interval' '
	start_live -v --settle 0 --status-interval 3s --backoff-base 200ms &&
	cat "$FIXTURES/create.jsonl" >&5 &&
	test_wait_for 5 count_ge 2 ".op == \"apply\"" &&
	pod_running w1-a 40 >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"status\" and .object.status.pods == [\"w1-a\"]" &&
	store_status &&
	sleep 3.2 &&
	pod_running w1-b 41 >&5 &&
	test_wait_for 5 count_ge 1 ".op == \"status\" and .object.status.pods == [\"w1-a\",\"w1-b\"]" &&
	echo "{\"op\":\"result\",\"for\":\"status\",\"primary\":\"blue/w1\",\"ok\":false,\"code\":409,\"reason\":\"Conflict\",\"message\":\"the object has been modified\"}" >&6 &&
	test_wait_for 2 count_ge 2 ".op == \"status\" and (.object.status.pods | length) == 2" &&
	stop_live &&
	test_no_sanitizer_report err
'

test_expect_success '--settle: the end of the input ends a burst, its status written' '
	mkfifo ended.fifo &&
	{ ( cat "$FIXTURES/create.jsonl"; test_wait_for 10 test_has_ops ended.out apply 2
	    pod_running w1-a 40; sleep 0.3 ) >ended.fifo & } &&
	WIDGET_TEAM=blue timeout 5 ireconcile --now $NOW --settle 1m prog/widgets <ended.fifo >ended.out 2>ended.err &&
	test_no_sanitizer_report ended.err &&
	jq -c "select(.op == \"status\") | .object.status.pods" ended.out | tail -n 1 >actual &&
	echo "[\"w1-a\"]" >expect &&
	test_cmp expect actual &&
	test "$(grep -c "widget is Ready" ended.out)" = 1
'

test_expect_success '--status-interval: the end of the input writes the status held for it' '
	mkfifo held.fifo &&
	{ ( cat "$FIXTURES/create.jsonl"; test_wait_for 10 test_has_ops held.out apply 2
	    pod_running w1-a 40; test_wait_for 10 grep -q "\"pods\":\[\"w1-a\"\]" held.out
	    pod_running w1-b 41; sleep 0.5 ) >held.fifo & } &&
	WIDGET_TEAM=blue timeout 5 ireconcile --now $NOW --settle 0 --status-interval 1m prog/widgets \
		<held.fifo >held.out 2>held.err &&
	test_no_sanitizer_report held.err &&
	jq -c "select(.op == \"status\") | .object.status.pods" held.out >actual &&
	printf "[\"w1-a\"]\n[\"w1-a\",\"w1-b\"]\n" >expect &&
	test_cmp expect actual
'

test_expect_success '--settle: pods that keep coming still reconcile, 5 --settles after the first at the latest' '
	start_settling 1s &&
	i=1 &&
	while test $i -le 20; do
		pod_running w1-p$i $((40 + i)) >&5 &&
		sleep 0.4 &&
		i=$((i + 1)) || return 1
	done &&
	statuses_after $lines >during &&
	stop_live &&
	test -s during &&
	test "$(jq length during | head -n 1)" -lt 20 &&
	test_no_sanitizer_report err
'

test_done
