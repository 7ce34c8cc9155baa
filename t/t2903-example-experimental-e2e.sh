#!/bin/sh
test_description='pipeline/experimental end to end: iot-operator --program experimental against ksim'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-examples.sh"

P="$PROJECT_ROOT/pipeline/experimental"
E=example-experimental
X=/apis/experiments.vapourware.com/v1alpha1/namespaces/default/experimentals/$E
PODS="/api/v1/namespaces/default/pods?labelSelector=app%3D$E"

example_e2e_setup

# replicas N: numberOfReplicas = N
replicas () {
	ksim_curl -o patched.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"numberOfReplicas\":$1}}" $X &&
	jq -e ".spec.numberOfReplicas == $1" patched.json
}

# kept N: exactly N pods of E exist, all Running, and the status counts N
kept () {
	ksim_curl -o pods.json "$PODS" &&
	test "$(jq ".items | length" pods.json)" = "$1" &&
	test "$(jq "[.items[] | select(.status.phase == \"Running\")] | length" pods.json)" = "$1" &&
	ksim_curl -o e.json $X &&
	jq -e ".status == {numberOfReplicas: $1, persistentVolumesUsed: []}" e.json
}

test_expect_success 'setup: the CRD, the example (3 replicas), the operator' '
	kapply -f "$PROJECT_ROOT/deploy/examples/experimental/crd.yaml" -f "$PROJECT_ROOT/deploy/examples/experimental/example.yaml" >setup.out &&
	! grep "\"ok\":false" setup.out &&
	example_operator_start "$P"
'

test_expect_success '3 busybox pods labelled app=E, owned by E; the status counts them' '
	test_wait_for 30 kept 3 &&
	jq -c "[.items[] | [.metadata.labels.app, (.spec.containers[] | [.image, .command]), (.metadata.ownerReferences[] | [.kind, .name, .controller, .uid])]] | unique" pods.json >actual &&
	echo "[[\"$E\",[\"busybox\",[\"sleep\",\"3600\"]],[\"Experimental\",\"$E\",true,\"$(jq -r .metadata.uid e.json)\"]]]" >expect &&
	test_cmp expect actual
'

# Deleted at once (grace 0, kubectl delete --force): a graceful delete keeps the pod
# terminating for a while, and the operator makes the replacement under the next free
# number instead, or under the same one if the kubelet was quicker.
test_expect_success 'a pod deleted by hand is made again' '
	ksim_curl -o del.json -X DELETE "/api/v1/namespaces/default/pods/$E-1?gracePeriodSeconds=0" &&
	remade () {
		kept 3 &&
		jq -e ".items | map(.metadata.name) | index(\"$E-1\")" pods.json
	} &&
	test_wait_for 30 remade
'

test_expect_success 'scaling up to 5 creates the missing pods' '
	jq -r ".items[] | .metadata.name" pods.json | sort >before &&
	sleep 1 &&
	replicas 5 &&
	test_wait_for 30 kept 5 &&
	jq -r ".items[] | .metadata.name" pods.json | sort >after &&
	comm -23 before after >lost &&
	test_cmp /dev/null lost
'

test_expect_success 'steady state: nothing to write' '
	example_snapshot "$P" snap.jsonl &&
	ireconcile "$P" <snap.jsonl >steady.out 2>steady.err &&
	cat steady.out &&
	test_cmp /dev/null steady.out
'

test_expect_success 'scaling down to 2 deletes the youngest pods first' '
	jq -r ".items | sort_by(.metadata.creationTimestamp, (.metadata.name | ltrimstr(\"$E-\") | tonumber)) | .[:2][] | .metadata.name" pods.json >oldest &&
	replicas 2 &&
	test_wait_for 30 kept 2 &&
	jq -r ".items[] | .metadata.name" pods.json | sort >actual &&
	sort oldest >expect &&
	test_cmp expect actual
'

test_expect_success 'deleting the Experimental deletes its pods' '
	ksim_curl -o deleted.json -X DELETE $X &&
	gone () {
		ksim_curl -o p.json "$PODS" &&
		jq -e ".items | length == 0" p.json
	} &&
	test_wait_for 30 gone
'

test_expect_success 'the operator ran without a restart and stops cleanly' '
	example_operator_done
'

test_done
