#!/bin/sh
test_description='pipeline/at end to end: iot-operator --program at against ksim (PENDING, RUNNING, DONE, bad schedule)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-examples.sh"

P="$PROJECT_ROOT/pipeline/at"
ATS=/apis/at.example.com/v1alpha1/namespaces/default/ats

example_e2e_setup

# at NAME SCHEDULE COMMAND: create or change an At
at () {
	kapply -f - >at.out <<-EOT &&
	{"apiVersion":"at.example.com/v1alpha1","kind":"At","metadata":{"name":"$1","namespace":"default"},"spec":{"schedule":"$2","command":"$3"}}
	EOT
	! grep "\"ok\":false" at.out
}

phase_is () {
	ksim_curl -o at.json $ATS/$1 &&
	jq -e ".status.phase == \"$2\"" at.json
}

test_expect_success 'setup: the CRD, the operator' '
	kapply -f "$PROJECT_ROOT/deploy/examples/at/crd.yaml" >crd.out &&
	! grep "\"ok\":false" crd.out &&
	example_operator_start "$P"
'

test_expect_success 'an At due in 6 s is PENDING, with no pod, until then' '
	schedule=$(date -u -d "+6 seconds" +%Y-%m-%dT%H:%M:%SZ) &&
	echo "$schedule" >schedule &&
	at later "$schedule" "echo YAY" &&
	test_wait_for 10 phase_is later PENDING &&
	ksim_curl -o pod.json /api/v1/namespaces/default/pods/later &&
	jq -e ".code == 404" pod.json &&
	test $(date -u +%s) -lt $(date -u -d "$schedule" +%s)
'

test_expect_success 'at the schedule a busybox pod owned by the At runs the command: RUNNING' '
	test_wait_for 15 phase_is later RUNNING &&
	ksim_curl -o pod.json /api/v1/namespaces/default/pods/later &&
	jq -c "[.spec.restartPolicy, (.spec.containers[] | [.image, .command]), (.metadata.ownerReferences[] | [.kind, .name, .controller, .uid])]" pod.json >actual &&
	echo "[\"Never\",[\"busybox\",[\"sh\",\"-c\",\"echo YAY\"]],[\"At\",\"later\",true,\"$(jq -r .metadata.uid at.json)\"]]" >expect &&
	test_cmp expect actual &&
	test $(date -u -d "$(jq -r .metadata.creationTimestamp pod.json)" +%s) -ge $(date -u -d "$(cat schedule)" +%s)
'

test_expect_success 'when the pod has finished: DONE; the pod is kept' '
	test_wait_for 20 phase_is later DONE &&
	ksim_curl -o pod.json /api/v1/namespaces/default/pods/later &&
	jq -e ".status.phase == \"Succeeded\"" pod.json
'

# reasons NAME: the reasons of the events recorded on At NAME, oldest first
reasons () {
	ksim_curl -o events.json "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$1" &&
	jq -r ".items | sort_by(.firstTimestamp, .metadata.name) | .[] | \"\(.type) \(.reason)\"" events.json
}

test_expect_success 'each transition was recorded once as an event' '
	reasons later >actual &&
	printf "Normal Scheduled\nNormal Started\nNormal Finished\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'an unparsable schedule is reported in the status and as a Warning event' '
	at bad tomorrow "echo no" &&
	has_error () {
		ksim_curl -o bad.json $ATS/bad &&
		jq -e ".status.phase == \"PENDING\" and (.status.error | startswith(\"unable to parse spec.schedule \\\"tomorrow\\\"\"))" bad.json
	} &&
	test_wait_for 10 has_error &&
	test_wait_for 10 eval "reasons bad >bad.reasons && grep -q \"Warning InvalidSchedule\" bad.reasons" &&
	ksim_curl -o pod.json /api/v1/namespaces/default/pods/bad &&
	jq -e ".code == 404" pod.json
'

test_expect_success 'fixing the schedule (in the past) runs it at once; the error goes' '
	at bad 2020-01-01T00:00:00Z "echo fixed" &&
	test_wait_for 20 phase_is bad DONE &&
	jq -e ".status | has(\"error\") | not" at.json
'

test_expect_success 'steady state: nothing to write' '
	example_snapshot "$P" snap.jsonl &&
	ireconcile "$P" <snap.jsonl >steady.out 2>steady.err &&
	cat steady.out &&
	test_cmp /dev/null steady.out
'

test_expect_success 'deleting an At garbage-collects its pod' '
	ksim_curl -o deleted.json -X DELETE $ATS/later &&
	gone () {
		ksim_curl -o pod.json /api/v1/namespaces/default/pods/later &&
		jq -e ".code == 404" pod.json
	} &&
	test_wait_for 30 gone
'

test_expect_success 'the operator ran without a restart and stops cleanly' '
	example_operator_done
'

test_done
