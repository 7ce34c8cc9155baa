#!/bin/sh
test_description='pipeline/memcached end to end: iot-operator --program memcached against ksim'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-examples.sh"

P="$PROJECT_ROOT/pipeline/memcached"
M=/apis/cache.example.com/v1alpha1/namespaces/default/memcacheds/example-memcached
PODS="/api/v1/namespaces/default/pods?labelSelector=app%3Dmemcached%2Cmemcached_cr%3Dexample-memcached"

example_e2e_setup

test_expect_success 'setup: the CRD and the example Memcached (size 3)' '
	kapply -f "$PROJECT_ROOT/deploy/examples/memcached/crd.yaml" -f "$PROJECT_ROOT/deploy/examples/memcached/example.yaml" >setup.out &&
	! grep "\"ok\":false" setup.out
'

test_expect_success 'the operator starts on the unchanged tools' '
	example_operator_start "$P"
'

# nodes_are N: N pods run, and status.nodes is their sorted names
nodes_are () {
	ksim_curl -o pods.json "$PODS" &&
	test "$(jq "[.items[] | select(.status.phase == \"Running\")] | length" pods.json)" = "$1" &&
	test "$(jq ".items | length" pods.json)" = "$1" &&
	jq -c "[.items[].metadata.name] | sort" pods.json >pods.names &&
	ksim_curl -o m.json $M &&
	jq -c ".status.nodes" m.json >status.names &&
	test_cmp pods.names status.names
}

test_expect_success 'a Deployment of 3 pods owned by the Memcached; status.nodes the sorted pod names' '
	test_wait_for 30 nodes_are 3 &&
	ksim_curl -o deploy.json /apis/apps/v1/namespaces/default/deployments/example-memcached &&
	jq -c "[.spec.replicas, .metadata.labels, (.metadata.ownerReferences[] | [.kind, .name, .uid, .controller])]" deploy.json >actual &&
	echo "[3,{\"app\":\"memcached\",\"memcached_cr\":\"example-memcached\"},[\"Memcached\",\"example-memcached\",\"$(jq -r .metadata.uid m.json)\",true]]" >expect &&
	test_cmp expect actual &&
	jq -c ".spec.template.spec.containers[] | [.name, .image, .command, (.ports | map({containerPort, name}))]" deploy.json >actual &&
	echo "[\"memcached\",\"memcached:1.4.36-alpine\",[\"memcached\",\"-m=64\",\"-o\",\"modern\",\"-v\"],[{\"containerPort\":11211,\"name\":\"memcached\"}]]" >expect &&
	test_cmp expect actual
'

test_expect_success 'steady state: what the server stores is what the program wants' '
	example_snapshot "$P" snap.jsonl &&
	ireconcile "$P" <snap.jsonl >steady.out 2>steady.err &&
	cat steady.out &&
	test_cmp /dev/null steady.out
'

test_expect_success 'editing size 3 -> 4 scales the Deployment; the fourth pod joins status.nodes' '
	ksim_curl -o patched.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"size\":4}}" $M &&
	jq -e ".spec.size == 4" patched.json &&
	test_wait_for 30 nodes_are 4 &&
	ksim_curl -o deploy.json /apis/apps/v1/namespaces/default/deployments/example-memcached &&
	jq -e ".spec.replicas == 4" deploy.json
'

test_expect_success 'deleting the Memcached garbage-collects its Deployment and pods' '
	ksim_curl -o deleted.json -X DELETE $M &&
	gone () {
		ksim_curl -o d.json /apis/apps/v1/namespaces/default/deployments/example-memcached &&
		jq -e ".code == 404" d.json &&
		ksim_curl -o p.json "$PODS" &&
		jq -e ".items | length == 0" p.json
	} &&
	test_wait_for 30 gone
'

test_expect_success 'the operator ran without a restart and stops cleanly' '
	example_operator_done
'

test_done
