#!/bin/sh
test_description='pipeline/at through ireconcile: recorded event files, golden operations, the timed requeue'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-examples.sh"

command -v ireconcile >/dev/null || test_skip_all 'ireconcile not built'

P="$PROJECT_ROOT/pipeline/at"

# The At example-at is scheduled at 10:10: the first two files are read at
# 10:05 (still PENDING), the others at 10:10 (due), as make-fixtures.sh did.
now_of () {
	case $1 in
	01-new|02-pending) echo 2026-11-22T10:05:00Z ;;
	*) echo 2026-11-22T10:10:00Z ;;
	esac
}

# reconcile NAME [NOW] [OUT]: the operations ireconcile writes for NAME.in.jsonl
reconcile () {
	ireconcile -v --now "${2:-$(now_of $1)}" "$P" <"$FIXTURES/$1.in.jsonl" >"${3:-$1}.out" 2>"${3:-$1}.err"
}

# ops NAME: "op kind name" of each operation, in order
ops () {
	jq -r '"\(.op) \(.object.kind // .event.involvedObject.kind) \(.object.metadata.name // ("\(.event.involvedObject.name) \(.event.type) \(.event.reason)"))"' "$1.out"
}

example_golden_tests

test_expect_success '02-pending read at the scheduled time (golden)' '
	reconcile 02-pending 2026-11-22T10:10:00Z 02-due &&
	test_no_sanitizer_report 02-due.err &&
	test_cmp_json "$FIXTURES/02-due.expect.jsonl" 02-due.out
'

test_expect_success '01-new: a new At is PENDING; no pod before the schedule' '
	ops 01-new >actual &&
	printf "status At example-at\nevent At example-at Normal Scheduled\n" >expect &&
	test_cmp expect actual &&
	example_status_is 01-new "{\"phase\":\"PENDING\"}"
'

test_expect_success '02-pending: PENDING before the schedule writes nothing' '
	test_cmp /dev/null 02-pending.out
'

test_expect_success '02-due: at the schedule a busybox pod owned by the At runs sh -c COMMAND; RUNNING' '
	ops 02-due >actual &&
	printf "apply Pod example-at\nstatus At example-at\nevent At example-at Normal Started\n" >expect &&
	test_cmp expect actual &&
	uid=$(jq -r "select(.type == \"ADDED\") | .object.metadata.uid" "$FIXTURES/02-pending.in.jsonl") &&
	jq -c "select(.op == \"apply\") | .object | [.metadata.namespace, .spec.restartPolicy, .spec.containers,
		(.metadata.ownerReferences[] | [.kind, .name, .controller, .uid])]" 02-due.out >actual &&
	echo "[\"default\",\"Never\",[{\"name\":\"busybox\",\"image\":\"busybox\",\"command\":[\"sh\",\"-c\",\"echo YAY\"]}],[\"At\",\"example-at\",true,\"$uid\"]]" >expect &&
	test_cmp expect actual &&
	example_status_is 02-due "{\"phase\":\"RUNNING\"}"
'

test_expect_success '03-running: the pod runs: nothing to write' '
	test_cmp /dev/null 03-running.out
'

test_expect_success '04-finished: the pod Succeeded: DONE, the pod is kept' '
	ops 04-finished >actual &&
	printf "status At example-at\nevent At example-at Normal Finished\n" >expect &&
	test_cmp expect actual &&
	example_status_is 04-finished "{\"phase\":\"DONE\"}"
'

test_expect_success '05-done: DONE is the end: nothing to write' '
	test_cmp /dev/null 05-done.out
'

test_expect_success '06-invalid: an unparsable schedule is reported in the status and a Warning event' '
	ops 06-invalid >actual &&
	printf "status At bad-at\nevent At bad-at Warning InvalidSchedule\n" >expect &&
	test_cmp expect actual &&
	example_status_is 06-invalid "{\"phase\":\"PENDING\",\"error\":\"unable to parse spec.schedule \\\"tomorrow\\\": want an RFC 3339 time such as 2023-03-19T08:00:00Z\"}"
'

test_expect_success '07-fixed: a schedule fixed to the past runs at once; the error goes' '
	ops 07-fixed >actual &&
	printf "apply Pod bad-at\nstatus At bad-at\nevent At bad-at Normal Started\n" >expect &&
	test_cmp expect actual &&
	example_status_is 07-fixed "{\"phase\":\"RUNNING\"}"
'

test_expect_success '08-deleted: a deleted At and its pod: nothing written for it (the other one finishes)' '
	ops 08-deleted >actual &&
	printf "status At bad-at\nevent At bad-at Normal Finished\n" >expect &&
	test_cmp expect actual
'

# sync IN: runs the program by itself (jq 1.6, as ireconcile does) on IN
sync () {
	jq -c -L "$PROJECT_ROOT/pipeline/lib" -L "$P" -f "$P/sync.jq" "$1"
}

# input SCHEDULE [STATUS] [POD]: a sync input at 10:05:00
input () {
	jq -n -c --arg s "$1" --argjson st "${2:-null}" --argjson pod "${3:-null}" '
		{parent: {apiVersion: "at.example.com/v1alpha1", kind: "At",
		          metadata: {name: "a", namespace: "n", uid: "u"},
		          spec: {schedule: $s, command: "date"}, status: $st},
		 children: {"Pod.v1": (if $pod then {a: ({apiVersion: "v1", kind: "Pod", metadata: {name: "a", namespace: "n"}} + $pod)} else {} end)},
		 related: {}, settings: {}, aggregates: {}, errors: [], finalizing: false,
		 now: "2026-11-22T10:05:00Z"}'
}

test_expect_success 'the requeue is the time left: offsets and fractions of RFC 3339' '
	for s in 2026-11-22T10:10:00Z 2026-11-22T11:10:00+01:00 2026-11-22T10:00:00-00:30 \
		2026-11-22t10:05:01.5z 2026-11-22T10:05:00Z 2026-11-22T10:04:59.999Z
	do
		input $s >in.json && sync in.json >out.json &&
		jq -r "\"\(.status.phase) \(.resyncAfterSeconds) \([.children[].kind])\"" out.json || return 1
	done >actual &&
	cat >expect <<-\EOT &&
	PENDING 300 []
	PENDING 300 []
	PENDING 1500 []
	PENDING 1.5 []
	RUNNING null ["Pod"]
	RUNNING null ["Pod"]
	EOT
	test_cmp expect actual
'

test_expect_success 'schedules that are not RFC 3339 times are errors, not crashes' '
	for s in tomorrow 2026-02-30T10:00:00Z 2026-11-22T24:00:00Z 2026-11-22 2026-11-22T10:00:00 \
		2026-11-22T10:00:00+25:00 "" " 2026-11-22T10:00:00Z"
	do
		input "$s" >in.json && sync in.json >out.json &&
		jq -r "\"\(.status.phase) \(.status.error != null) \(.resyncAfterSeconds) \(.children | length)\"" out.json || return 1
	done >actual &&
	for i in 1 2 3 4 5 6 7 8; do echo "PENDING true null 0"; done >expect &&
	test_cmp expect actual &&
	jq -n -c "{parent: {metadata: {name: \"a\", namespace: \"n\"}, spec: {command: \"x\"}}, children: {\"Pod.v1\": {}}, now: \"2026-11-22T10:05:00Z\"}" >in.json &&
	sync in.json >out.json &&
	jq -r .status.error out.json >actual &&
	echo "unable to parse spec.schedule null: want an RFC 3339 time such as 2023-03-19T08:00:00Z" >expect &&
	test_cmp expect actual
'

# A pod that exists is given back as the program saw it: kept as it is.
test_expect_success 'RUNNING without its pod makes it again; DONE without it does not; a Failed pod is DONE too' '
	input 2026-11-22T11:00:00Z "{\"phase\":\"RUNNING\"}" >in.json && sync in.json >out.json &&
	jq -c "[.status.phase, [.children[].metadata.name], .events]" out.json >actual &&
	input 2026-11-22T11:00:00Z "{\"phase\":\"DONE\"}" >in.json && sync in.json >out.json &&
	jq -c "[.status.phase, [.children[].metadata.name], .events]" out.json >>actual &&
	input 2026-11-22T11:00:00Z "{\"phase\":\"RUNNING\"}" "{\"status\":{\"phase\":\"Failed\"}}" >in.json && sync in.json >out.json &&
	jq -c "[.status.phase, .children, [.events[].message]]" out.json >>actual &&
	jq -c ".children[\"Pod.v1\"].a" in.json >pod &&
	cat >expect <<-EOT &&
	["RUNNING",["a"],[]]
	["DONE",[],[]]
	["DONE",[$(cat pod)],["pod a Failed"]]
	EOT
	test_cmp expect actual &&
	jq -e ".status.phase == \"Failed\"" pod
'

test_expect_success 'live: PENDING at once, then the pod at the scheduled time from a timer alone (no new event, no polling)' '
	mkfifo in &&
	{ timeout 30 ireconcile -v "$P" <in >live.out 2>live.err & } &&
	pid=$! &&
	exec 5>in &&
	schedule=$(date -u -d "+3 seconds" +%Y-%m-%dT%H:%M:%SZ) &&
	jq -c --arg s "$schedule" "select(.type == \"ADDED\") | .object.spec.schedule = \$s | .object.status = null | {type, object}" \
		"$FIXTURES/01-new.in.jsonl" >&5 &&
	grep BOOKMARK "$FIXTURES/01-new.in.jsonl" >&5 &&
	test_wait_for 10 grep -q "\"phase\":\"PENDING\"" live.out &&
	! grep -q "\"op\":\"apply\"" live.out &&
	test_wait_for 10 grep -q "\"op\":\"apply\"" live.out &&
	test $(date -u +%s) -ge $(date -u -d "$schedule" +%s) &&
	sleep 1.5 &&
	jq -r "select(.msg | startswith(\"reconciled \")) | .primary" live.err >reconciled &&
	printf "default/example-at\ndefault/example-at\n" >expect &&
	test_cmp expect reconciled &&
	exec 5>&- &&
	wait $pid &&
	test_no_sanitizer_report live.err &&
	jq -r "\"\(.op) \(.object.kind // .event.reason) \(.object.status.phase // \"-\")\"" live.out >actual &&
	cat >expect <<-\EOT &&
	status At PENDING
	event Scheduled -
	apply Pod -
	status At RUNNING
	event Started -
	EOT
	test_cmp expect actual
'

test_done
