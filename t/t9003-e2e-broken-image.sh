#!/bin/sh
test_description='end to end under deploy/ RBAC: a broken image is Processing, then Failed after the deadline, Available after a fix'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

e2e_ksim_start

# ksim: images matching '*:broken*' never pull (ErrImagePull, ImagePullBackOff).
# The broken image is the messaging StatefulSet's, whose rolling update
# replaces its one pod. (A Deployment keeps its old pod while the new one does
# not pull; the readiness rule of docs/iotservice-api.md then counts it ready.)
DEADLINE=6

test_expect_success 'setup: deploy/, the operator (deadline 6s), the example Available' '
	e2e_install &&
	e2e_operator_start op --progress-deadline ${DEADLINE}s &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	test_wait_for 30 status_is Available
'

progressing () {
	jq -r "[.status.phase, (.status.conditions[] | select(.type == \"Progressing\") | .status, .reason)] | join(\" \")" iot.json
}

test_expect_success 'a broken image: Processing (Updating) while its pod does not pull' '
	k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"mms\":{\"image\":\"registry.example/messaging:broken\"}}}" >patch.out &&
	date +%s >edited.at &&
	test_wait_for 10 status_is Processing &&
	# kstatus coalesces: the first Processing status ("spec generation N is
	# being applied") may stand for up to --coalesce before the detailed one;
	# the bound is the progress deadline (6 s, then Failed), as slow as the
	# sanitizer build under a parallel run may be
	names_messaging () {
		status_is Processing &&
		jq -r ".status.conditions[] | select(.type == \"Progressing\") | .message" iot.json >message &&
		grep "StatefulSet messaging-$X" message
	} &&
	test_wait_for $DEADLINE names_messaging &&
	progressing >actual &&
	echo "Processing True Updating" >expect &&
	test_cmp expect actual || {
		jq -c .status iot.json
		grep -v "\"level\":\"debug\"" op.err | tail -n 30
		false
	}
'

test_expect_success 'still broken after the deadline: Failed, ProgressDeadlineExceeded, a Warning event' '
	test_wait_for 30 status_is Failed &&
	failed_after=$(( $(date +%s) - $(cat edited.at) )) &&
	test $failed_after -ge $DEADLINE &&
	progressing >actual &&
	echo "Failed False ProgressDeadlineExceeded" >expect &&
	test_cmp expect actual &&
	jq -r .status.reason iot.json >reason &&
	grep "^progress deadline exceeded: .*StatefulSet messaging-$X" reason &&
	jq -e "[.status.conditions[] | select(.type == \"Available\") | .status] == [\"False\"]" iot.json &&
	ksim_curl -o events.json "/api/v1/namespaces/$O/events?fieldSelector=involvedObject.name%3D$X" &&
	jq -e "any(.items[]; .type == \"Warning\" and .reason == \"Failed\" and (.message | startswith(\"progress deadline exceeded\")))" events.json
'

test_expect_success 'Failed stays Failed while nothing changes (no flapping back to Processing)' '
	sleep 3 &&
	status_is Failed
'

test_expect_success 'the image fixed: Available again, the reason gone' '
	k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"mms\":{\"image\":\"registry.example/messaging:4.34.0\"}}}" >patch.out &&
	fixed_template () {
		ksim_curl -o mms.json "/apis/apps/v1/namespaces/$I/statefulsets/messaging-$X" &&
		jq -e ".spec.template.spec.containers[0].image == \"registry.example/messaging:4.34.0\"" mms.json
	} &&
	test_wait_for 10 fixed_template &&
	# As on a real cluster, a StatefulSet does not replace a pod that never
	# became ready (kubernetes#67250): the stuck pod is deleted by hand.
	k delete pod -n $I messaging-$X-0 --wait=false >delpod.out &&
	test_wait_for 30 status_is Available &&
	jq -e "(.status | has(\"reason\") | not) and .metadata.generation == 3" iot.json &&
	progressing >actual &&
	echo "Available False Complete" >expect &&
	test_cmp expect actual &&
	ksim_curl -o mms.json "/apis/apps/v1/namespaces/$I/statefulsets/messaging-$X" &&
	jq -e ".spec.template.spec.containers[0].image == \"registry.example/messaging:4.34.0\" and
		.status.readyReplicas == 1 and .status.currentRevision == .status.updateRevision" mms.json &&
	test_wait_for 10 steady_state
'

test_expect_success 'the operator: no 403, no restart, a clean stop' '
	! grep -i forbidden op.err &&
	! grep "restarting the pipeline" op.err &&
	e2e_operator_stop op &&
	ksim_stop
'

test_done
