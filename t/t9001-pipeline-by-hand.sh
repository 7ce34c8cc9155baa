#!/bin/sh
test_description='the stages composed by hand in a shell (README "Composing the tools by hand") reach the state the supervisor reaches'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

# The README's lines, run as they are written there (with pipeline/ from
# the source tree, and each stage's stderr and exit code kept, since the
# tools under test must not be hidden behind a pipe's status).
PROGRAM=$PROJECT_ROOT/pipeline/iotservice
export OPERATOR_NAME=$O

e2e_ksim_start
KUBECONFIG=$TRASH/op.kubeconfig
export KUBECONFIG

test_expect_success 'setup: deploy/ and the example, as the admin' '
	e2e_install &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out
'

test_expect_success 'the watches, as kwatch arguments' '
	ireconcile --print-watches "$PROGRAM" >watches.jsonl &&
	jq -r ".resource + \"@\" + (if .namespace == \"\" then \"*\" else .namespace end) + \":l=\" + .labelSelector + \":f=\" + .fieldSelector
		+ (if .keep then \":k=\" + .keep else \"\" end)" \
		watches.jsonl >watches.args &&
	test_line_count_ () { test "$(wc -l <"$2")" = "$1"; } &&
	test_line_count_ 10 watches.args &&
	grep "^secrets@~:l=app.kubernetes.io/managed-by=iot-operator,cp.iot.sap/operator=devawsk8s:f=$" watches.args &&
	grep "^iotservices.cp.iot.sap@devawsk8s:l=:f=$" watches.args &&
	grep "^secrets@devawsk8s:l=:f=metadata.name=image-pull-secret$" watches.args &&
	grep "^pods@\*:l=app.kubernetes.io/managed-by=iot-operator,cp.iot.sap/operator=devawsk8s:f=:k=metadata.labels,status.phase$" watches.args
'

test_expect_success 'kwatch --once | ireconcile | kapply --dry-run: the requests, nothing written' '
	set -- $(cat watches.args) &&
	{ kwatch --once "$@" 2>kwatch.err; echo $? >kwatch.code; } |
	{ ireconcile "$PROGRAM" 2>ireconcile.err; echo $? >ireconcile.code; } |
	{ kapply --dry-run >dry.out 2>kapply.err; echo $? >kapply.code; } &&
	echo 0 >expect &&
	test_cmp expect kwatch.code && test_cmp expect ireconcile.code && test_cmp expect kapply.code &&
	# a new instance: the finalizer patch first, nothing else before it is stored
	jq -s -c "[map(select(.op == \"dry-run\") | .for) | group_by(.) | .[] | [.[0], length]]" dry.out >actual &&
	echo "[[\"patch\",1]]" >expect &&
	test_cmp expect actual &&
	jq -s -e "map(select(.op == \"status\")) | length == 0" dry.out &&
	iot_get && jq -e ".status == null and .metadata.finalizers == null" iot.json &&
	# the finalizer stored (as the admin here): the instance namespace created (a create, never an
	# apply over one that exists), nothing else and no status until it is seen
	k patch iotservice -n $O $X --type merge -p "{\"metadata\":{\"finalizers\":[\"com.sap.iotservices/namespace-dropper\"]}}" >patch.out &&
	{ kwatch --once "$@" 2>kwatch.err; echo $? >kwatch.code; } |
	{ ireconcile "$PROGRAM" 2>ireconcile.err; echo $? >ireconcile.code; } |
	{ kapply --dry-run >dry2.out 2>kapply.err; echo $? >kapply.code; } &&
	test "$(cat kwatch.code)" = 0 && test "$(cat ireconcile.code)" = 0 && test "$(cat kapply.code)" = 0 &&
	jq -s -c "[map(select(.op == \"dry-run\") | .for) | group_by(.) | .[] | [.[0], length]]" dry2.out >actual &&
	echo "[[\"create\",1]]" >expect &&
	test_cmp expect actual &&
	iot_get &&
	jq -s -e --arg uid "$(jq -r .metadata.uid iot.json)" "map(select(.op == \"dry-run\") | .request)
		| length == 1 and .[0].method == \"POST\"
		and .[0].body.metadata.annotations[\"cp.iot.sap/iotservice-uid\"] == \$uid" dry2.out &&
	jq -s -e "map(select(.op == \"status\")) | length == 0" dry2.out &&
	ksim_curl -o ns.json /api/v1/namespaces/$I &&
	jq -e ".code == 404" ns.json &&
	iot_get && jq -e ".status == null" iot.json
'

test_expect_success 'for real: kwatch | ireconcile --feedback | kapply | kstatus reaches Available' '
	mkfifo feedback &&
	set -- $(cat watches.args) &&
	{ (
		{ kwatch "$@" 2>kwatch.err & echo $! >kwatch.pid; wait $!; echo $? >kwatch.code; } |
		{ ireconcile --feedback feedback "$PROGRAM" 2>ireconcile.err; echo $? >ireconcile.code; } |
		{ kapply 2>kapply.err; echo $? >kapply.code; } |
		{ kstatus >feedback 2>kstatus.err; echo $? >kstatus.code; }
		echo done >pipeline.done
	) & } &&
	test_wait_for 60 children_there &&
	test_wait_for 60 status_is Available &&
	test_wait_for 10 steady_state &&
	children_dump by-hand.json &&
	jq -c "[.status.phase, (.status.pods | length), [.status.conditions[] | [.type, .status, .reason]], .metadata.finalizers]" \
		iot.json >by-hand.status &&
	kill -TERM "$(cat kwatch.pid)" &&
	test_wait_for 20 test -f pipeline.done &&
	echo 0 >expect &&
	for s in kwatch ireconcile kapply kstatus; do
		test_cmp expect $s.code &&
		test_no_sanitizer_report $s.err || return 1
	done &&
	! grep -i forbidden kapply.err kstatus.err
'

test_expect_success 'the same cluster from scratch under the supervisor: the same children, the same status' '
	ksim_stop &&
	rm -f "$TRASH/ksim.log"
'

# A fresh ksim for the supervisor's run (top level: ksim_start sets variables).
e2e_ksim_start
KUBECONFIG=$TRASH/op.kubeconfig

test_expect_success 'iot-operator on a fresh cluster: Available, children and status equal' '
	e2e_install &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	e2e_operator_start sup --leader-elect=false &&
	test_when_finished "e2e_operator_stop sup" &&
	test_wait_for 60 children_there &&
	test_wait_for 60 status_is Available &&
	children_dump supervisor.json &&
	jq -c "[.status.phase, (.status.pods | length), [.status.conditions[] | [.type, .status, .reason]], .metadata.finalizers]" \
		iot.json >supervisor.status &&
	test_cmp by-hand.json supervisor.json &&
	test_cmp by-hand.status supervisor.status &&
	e2e_operator_stop sup &&
	ksim_stop
'

test_done
