#!/bin/sh
test_description='pipeline/experimental through ireconcile: recorded event files, golden operations'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-examples.sh"

command -v ireconcile >/dev/null || test_skip_all 'ireconcile not built'

P="$PROJECT_ROOT/pipeline/experimental"
E=example-experimental

# reconcile NAME [IN]: the operations ireconcile writes for NAME.in.jsonl (or IN)
reconcile () {
	ireconcile -v --now 2026-11-22T10:00:00Z "$P" <"${2:-$FIXTURES/$1.in.jsonl}" >"$1.out" 2>"$1.err"
}

# ops NAME: "op kind name" of each operation, in order
ops () {
	jq -r '"\(.op) \(.object.kind) \(.object.metadata.name)"' "$1.out"
}

example_golden_tests

test_expect_success '01-new: numberOfReplicas busybox pods labelled app=E, owned by E; nothing counted yet' '
	ops 01-new >actual &&
	cat >expect <<-EOT &&
	apply Pod $E-0
	apply Pod $E-1
	apply Pod $E-2
	status Experimental $E
	EOT
	test_cmp expect actual &&
	uid=$(jq -r "select(.type == \"ADDED\") | .object.metadata.uid" "$FIXTURES/01-new.in.jsonl") &&
	jq -c "select(.op == \"apply\") | .object | [.metadata.labels, .spec.containers,
		(.metadata.ownerReferences[] | [.kind, .name, .controller, .uid])]" 01-new.out | sort -u >actual &&
	echo "[{\"app\":\"$E\"},[{\"name\":\"busybox\",\"image\":\"busybox\",\"command\":[\"sleep\",\"3600\"]}],[\"Experimental\",\"$E\",true,\"$uid\"]]" >expect &&
	test_cmp expect actual &&
	example_status_is 01-new "{\"numberOfReplicas\":0,\"persistentVolumesUsed\":[]}"
'

test_expect_success '02-pods: the status counts the pods; the pods are left alone' '
	ops 02-pods >actual &&
	echo "status Experimental $E" >expect &&
	test_cmp expect actual &&
	jq -c ".object.status" 02-pods.out >actual &&
	echo "{\"numberOfReplicas\":3,\"persistentVolumesUsed\":[]}" >expect &&
	test_cmp expect actual
'

test_expect_success '03-steady: nothing written' '
	test_cmp /dev/null 03-steady.out
'

test_expect_success '04-up: 3 -> 5 creates the two missing pods only' '
	ops 04-up >actual &&
	printf "apply Pod $E-3\napply Pod $E-4\n" >expect &&
	test_cmp expect actual
'

test_expect_success '05-up-done: the status counts 5' '
	jq -c ".object.status" 05-up-done.out >actual &&
	echo "{\"numberOfReplicas\":5,\"persistentVolumesUsed\":[]}" >expect &&
	test_cmp expect actual
'

test_expect_success '06-down: 5 -> 2 deletes the youngest three, with uid preconditions' '
	ops 06-down >actual &&
	printf "delete Pod $E-2\ndelete Pod $E-3\ndelete Pod $E-4\n" >expect &&
	sort actual >sorted &&
	test_cmp expect sorted &&
	jq -r "select(.op == \"delete\") | \"\(.object.metadata.name) \(.object.metadata.uid)\"" 06-down.out | sort >actual &&
	jq -r "select(.object.kind == \"Pod\") | \"\(.object.metadata.name) \(.object.metadata.uid)\"" "$FIXTURES/06-down.in.jsonl" |
		grep -E -e "-(2|3|4) " | sort >expect &&
	test_cmp expect actual
'

test_expect_success '07-down-done: the status counts 2' '
	jq -c ".object.status" 07-down-done.out >actual &&
	echo "{\"numberOfReplicas\":2,\"persistentVolumesUsed\":[]}" >expect &&
	test_cmp expect actual
'

test_expect_success '08-deleted: a deleted Experimental is left to the garbage collector: nothing written' '
	test_cmp /dev/null 08-deleted.out
'

test_expect_success 'youngest first is by creation time, not by name; a terminating pod is not deleted again' '
	jq -c "if .object.kind == \"Pod\" then
		.object.metadata.creationTimestamp = ({\"$E-0\": \"2026-11-22T09:00:09Z\", \"$E-1\": \"2026-11-22T09:00:01Z\",
			\"$E-2\": \"2026-11-22T09:00:03Z\", \"$E-3\": \"2026-11-22T09:00:02Z\", \"$E-4\": \"2026-11-22T09:00:05Z\"}[.object.metadata.name])
		| if .object.metadata.name == \"$E-1\" then .object.metadata.deletionTimestamp = \"2026-11-22T09:59:00Z\" else . end
		else . end" "$FIXTURES/06-down.in.jsonl" >aged.jsonl &&
	reconcile aged aged.jsonl &&
	ops aged >actual &&
	jq -r "select(.op == \"delete\") | .object.metadata.name" aged.out | sort >actual &&
	printf "$E-0\n$E-4\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'new pods take the lowest free numbers; a terminating pod keeps its name' '
	jq -c "if .object.kind == \"Pod\" and .object.metadata.name == \"$E-1\" then .object.metadata.deletionTimestamp = \"2026-11-22T09:59:00Z\"
		elif .object.kind == \"Pod\" and .object.metadata.name == \"$E-0\" then empty else . end" \
		"$FIXTURES/07-down-done.in.jsonl" >gap.jsonl &&
	reconcile gap gap.jsonl &&
	jq -r "select(.op == \"apply\") | .object.metadata.name" gap.out >actual &&
	printf "$E-0\n$E-2\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'persistentVolumesUsed: the claims the pods mount, sorted, once each' '
	jq -c "if .object.kind == \"Pod\" then .object.spec.volumes += [{name: \"d\", persistentVolumeClaim: {claimName: \"data-\(.object.metadata.name | .[-1:])\"}},
		{name: \"s\", persistentVolumeClaim: {claimName: \"shared\"}}] else . end" \
		"$FIXTURES/07-down-done.in.jsonl" >pvc.jsonl &&
	reconcile pvc pvc.jsonl &&
	jq -c ".object.status" pvc.out >actual &&
	echo "{\"numberOfReplicas\":2,\"persistentVolumesUsed\":[\"data-0\",\"data-1\",\"shared\"]}" >expect &&
	test_cmp expect actual
'

test_done
