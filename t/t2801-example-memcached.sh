#!/bin/sh
test_description='pipeline/memcached through ireconcile: recorded event files, golden operations'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-examples.sh"

command -v ireconcile >/dev/null || test_skip_all 'ireconcile not built'

P="$PROJECT_ROOT/pipeline/memcached"

# reconcile NAME: the operations ireconcile writes for NAME.in.jsonl
reconcile () {
	ireconcile -v --now 2026-11-22T10:00:00Z "$P" <"$FIXTURES/$1.in.jsonl" >"$1.out" 2>"$1.err"
}

# ops NAME: "op kind name" of each operation, in order
ops () {
	jq -r '"\(.op) \(.object.kind // .event.involvedObject.kind) \(.object.metadata.name // .event.reason)"' "$1.out"
}

example_golden_tests

test_expect_success 'the watches: Memcacheds, Deployments and pods labelled app=memcached' '
	ireconcile --print-watches "$P" >watches.out &&
	jq -r "[.role, .resource, .labelSelector] | @tsv" watches.out >actual &&
	printf "primary\tmemcacheds.cache.example.com\t\nchild\tdeployments.apps\tapp=memcached\nobserved\tpods\tapp=memcached\n" >expect &&
	test_cmp expect actual
'

test_expect_success '01-new: a Deployment of size replicas, owned by the Memcached; no pods yet, so no status (nodes [] says what none says)' '
	ops 01-new >actual &&
	printf "apply Deployment example-memcached\n" >expect &&
	test_cmp expect actual &&
	jq -c "select(.op == \"apply\") | .object | [.spec.replicas, .metadata.labels, .spec.selector.matchLabels,
		.spec.template.metadata.labels, (.metadata.ownerReferences[] | [.kind, .name, .controller, .uid])]" 01-new.out >actual &&
	uid=$(jq -r "select(.type == \"ADDED\") | .object.metadata.uid" "$FIXTURES/01-new.in.jsonl") &&
	l="{\"app\":\"memcached\",\"memcached_cr\":\"example-memcached\"}" &&
	echo "[3,$l,$l,$l,[\"Memcached\",\"example-memcached\",true,\"$uid\"]]" >expect &&
	test_cmp expect actual &&
	jq -c "select(.op == \"apply\") | .object.spec.template.spec.containers" 01-new.out >actual &&
	echo "[{\"name\":\"memcached\",\"image\":\"memcached:1.4.36-alpine\",\"command\":[\"memcached\",\"-m=64\",\"-o\",\"modern\",\"-v\"],\"ports\":[{\"containerPort\":11211,\"name\":\"memcached\"}]}]" >expect &&
	test_cmp expect actual &&
	! grep "\"op\":\"status\"" 01-new.out
'

test_expect_success '02-pods: status.nodes is the sorted names of the pods, the Deployment is left alone' '
	ops 02-pods >actual &&
	echo "status Memcached example-memcached" >expect &&
	test_cmp expect actual &&
	jq -r "select(.object.kind == \"Pod\") | .object.metadata.name" "$FIXTURES/02-pods.in.jsonl" | sort >expect &&
	test $(wc -l <expect) = 3 &&
	jq -r ".object.status.nodes[]" 02-pods.out >actual &&
	test_cmp expect actual
'

test_expect_success '03-steady: what the server stores is what the program wants: nothing written' '
	test_cmp /dev/null 03-steady.out
'

test_expect_success '04-scale: size 3 -> 4 applies replicas 4 and nothing else' '
	ops 04-scale >actual &&
	echo "apply Deployment example-memcached" >expect &&
	test_cmp expect actual &&
	jq -c ".object.spec.replicas" 04-scale.out >actual &&
	echo 4 >expect &&
	test_cmp expect actual
'

test_expect_success '05-scaled: the fourth pod joins status.nodes, sorted' '
	ops 05-scaled >actual &&
	echo "status Memcached example-memcached" >expect &&
	test_cmp expect actual &&
	jq -r "select(.object.kind == \"Pod\") | .object.metadata.name" "$FIXTURES/05-scaled.in.jsonl" | sort >expect &&
	test $(wc -l <expect) = 4 &&
	jq -r ".object.status.nodes[]" 05-scaled.out >actual &&
	test_cmp expect actual
'

test_expect_success '06-deleted: a deleted Memcached is left to the garbage collector: nothing written' '
	test_cmp /dev/null 06-deleted.out
'

test_expect_success 'pods of another Memcached or without memcached_cr do not count' '
	jq -r "select(.object.kind == \"Pod\") | .object.metadata.name" "$FIXTURES/05-scaled.in.jsonl" | sort >pods &&
	test $(wc -l <pods) = 4 &&
	other=$(sed -n 1p pods) && unlabelled=$(sed -n 2p pods) &&
	jq -c --arg other "$other" --arg unlabelled "$unlabelled" "
		if .object.metadata.name == \$other then .object.metadata.labels.memcached_cr = \"other\"
		elif .object.metadata.name == \$unlabelled then del(.object.metadata.labels.memcached_cr)
		else . end" "$FIXTURES/05-scaled.in.jsonl" >foreign.jsonl &&
	ireconcile --now 2026-11-22T10:00:00Z "$P" <foreign.jsonl >foreign.out 2>foreign.err &&
	jq -r ".object.status.nodes[]" foreign.out >actual &&
	sed -n 3,4p pods >expect &&
	test_cmp expect actual
'

# One line of 02-pods.in.jsonl, by its kind (and for pods, its place among them).
line_of () {
	jq -c --arg k "$1" "select(.object.kind == \$k)" "$FIXTURES/02-pods.in.jsonl" | sed -n "${2:-1}p"
}

# A status naming N pods has been written to live.out.
nodes_written () {
	nodes_written_in live.out "$1" 1
}

# FILE holds at least COUNT statuses naming N pods.
nodes_written_in () {
	jq -e -s "[.[] | select(.op == \"status\" and (.object.status.nodes | length) == $2)] | length >= $3" "$1"
}

test_expect_success 'a drift fixed while pods are still coming writes no status of the pods so far: one status once they settle' '
	mkfifo live.in &&
	{ timeout 30 ireconcile -v --now 2026-11-22T10:00:00Z --settle 3s "$P" <live.in >live.out 2>live.err & } &&
	pid=$! &&
	exec 5>live.in &&
	line_of Memcached | jq -c "del(.object.status)" >&5 &&
	line_of Deployment >&5 &&
	tail -n 1 "$FIXTURES/02-pods.in.jsonl" >&5 &&
	test_wait_for 5 grep -q "reconciled .default/example-memcached" live.err &&
	line_of Pod 1 >&5 &&
	sleep 0.2 &&
	line_of Deployment | jq -c ".type = \"MODIFIED\" | .object.metadata.resourceVersion = \"26\" | .object.spec.replicas = 2" >&5 &&
	test_wait_for 5 grep -q "\"op\":\"apply\"" live.out &&
	line_of Pod 2 >&5 &&
	test_wait_for 10 nodes_written 2 &&
	exec 5>&- &&
	wait $pid &&
	jq -c "select(.op == \"status\") | .object.status.nodes" live.out >actual &&
	jq -c -s "[.[] | select(.object.kind == \"Pod\") | .object.metadata.name][0:2] | sort" "$FIXTURES/02-pods.in.jsonl" >expect &&
	test_cmp expect actual &&
	jq -c "select(.op == \"apply\") | .object.spec.replicas" live.out >actual &&
	echo 3 >expect &&
	test_cmp expect actual &&
	test_no_sanitizer_report live.err
'

test_expect_success 'a status write that failed is written again after its backoff' '
	mkfifo fail.in fail.fb &&
	{ timeout 30 ireconcile -v --now 2026-11-22T10:00:00Z --settle 0 --status-interval 1m --backoff-base 200ms \
		--feedback fail.fb "$P" <fail.in >fail.out 2>fail.err & } &&
	pid=$! &&
	exec 5>fail.in &&
	test_wait_for 5 test -p fail.fb &&
	exec 6<>fail.fb &&
	line_of Memcached | jq -c "del(.object.status)" >&5 &&
	line_of Deployment >&5 &&
	line_of Pod 1 >&5 && line_of Pod 2 >&5 && line_of Pod 3 >&5 &&
	tail -n 1 "$FIXTURES/02-pods.in.jsonl" >&5 &&
	test_wait_for 5 nodes_written_in fail.out 3 1 &&
	echo "{\"op\":\"result\",\"for\":\"status\",\"primary\":\"default/example-memcached\",\"ok\":false,\"code\":409,\"reason\":\"Conflict\",\"message\":\"the object has been modified\"}" >&6 &&
	test_wait_for 10 nodes_written_in fail.out 3 2 &&
	exec 5>&- 6>&- &&
	wait $pid &&
	test_no_sanitizer_report fail.err
'

# grow NAME PROGRAM: PROGRAM live (--status-interval 1m) on the Memcached, its
# Deployment and then its pods one at a time: each status is written as the
# list grows (NAME.out), before the input ends.
grow () {
	mkfifo "$1.in" &&
	{ timeout 30 ireconcile -v --now 2026-11-22T10:00:00Z --settle 0 --status-interval 1m "$2" <"$1.in" >"$1.out" 2>"$1.err" & } &&
	pid=$! &&
	exec 5>"$1.in" &&
	line_of Memcached | jq -c "del(.object.status)" >&5 &&
	line_of Deployment >&5 &&
	tail -n 1 "$FIXTURES/02-pods.in.jsonl" >&5 &&
	line_of Pod 1 >&5 &&
	test_wait_for 5 nodes_written_in "$1.out" 1 1 &&
	line_of Pod 2 >&5 &&
	test_wait_for 5 nodes_written_in "$1.out" 2 1 &&
	exec 5>&- &&
	wait $pid &&
	test_no_sanitizer_report "$1.err"
}

test_expect_success 'a growing list of pods, all a status says, is written as it grows: not held for --status-interval' '
	grow grow "$P" &&
	jq -c "select(.op == \"status\") | .object.status.nodes | length" grow.out >actual &&
	printf "1\n2\n" >expect &&
	test_cmp expect actual
'

test_expect_success '... and so is one whose conditions list is empty (it says no more)' '
	mkdir cprog && cp -R "$P" cprog/conds && cp -R "$PROJECT_ROOT/pipeline/lib" cprog/lib &&
	sed -i "s/status: {nodes: (\[.children\[\"Pod.v1\"\]\[\] | .metadata.name\] | sort)}}/status: {nodes: ([.children[\"Pod.v1\"][] | .metadata.name] | sort), conditions: []}}/" cprog/conds/sync.jq &&
	grep -q "conditions: \[\]" cprog/conds/sync.jq &&
	grow conds cprog/conds
'

test_done
