#!/bin/sh
test_description='kstatus against ksim: status writes, no-op skips, deleted objects, passthrough'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_start

# status_line NAME UID STATUS-JSON [PRIMARY]
status_line () {
	printf '{"op":"status","primary":"%s","object":{"apiVersion":"test.example.org/v1","kind":"Widget","metadata":{"name":"%s","namespace":"ns","uid":"%s"},"status":%s}}\n' \
		"${4:-ns/$1}" "$1" "$2" "$3"
}

get_w () {
	timeout 30 kubectl get widgets.test.example.org "$1" -n ns -o json >"$1.json"
}

test_expect_success 'setup: ksim, a CRD with a status subresource, a Widget' '
	timeout 60 kapply -f "$TEST_DIRECTORY/t3001-kapply-ksim/crd.yaml" -f "$FIXTURES/ns.yaml" >out 2>err ||
	timeout 60 kapply -f "$FIXTURES/ns.yaml" -f "$TEST_DIRECTORY/t3001-kapply-ksim/crd.yaml" >out 2>err &&
	get_w w1 &&
	jq -e ".metadata.generation == 1" w1.json
'

test_expect_success 'write: the status is patched, observedGeneration as given, the spec untouched' '
	uid=$(jq -r .metadata.uid w1.json) &&
	status_line w1 "$uid" "{\"phase\":\"Processing\",\"observedGeneration\":1,\"conditions\":[{\"type\":\"Available\",\"status\":\"False\"}]}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Processing\",\"observedGeneration\":1,\"conditions\":[{\"type\":\"Available\",\"status\":\"False\"}]} and
		.spec.color == \"red\"" w1.json &&
	jq -e ".op == \"result\" and .for == \"status\" and .ok == true and .primary == \"ns/w1\" and
		.resourceVersion == \"$(jq -r .metadata.resourceVersion w1.json)\"" out
'

test_expect_success 'no-op: the same status again writes nothing (no resourceVersion change)' '
	rv=$(jq -r .metadata.resourceVersion w1.json) &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == true and .unchanged == true and .resourceVersion == \"$rv\"" out &&
	get_w w1 &&
	test "$(jq -r .metadata.resourceVersion w1.json)" = "$rv"
'

test_expect_success 'a smaller status replaces the stored one (removed keys go)' '
	uid=$(jq -r .metadata.uid w1.json) &&
	status_line w1 "$uid" "{\"phase\":\"Available\",\"observedGeneration\":1}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Available\",\"observedGeneration\":1}" w1.json
'

test_expect_success 'a deleted object is skipped quietly, with a result line' '
	status_line gone "some-uid" "{\"phase\":\"Available\"}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == true and .skipped == \"deleted\" and .code == 404" out &&
	! grep "\"level\":\"error\"" err
'

test_expect_success 'an object deleted and created again (another uid) is skipped too' '
	status_line w1 "the-old-uid" "{\"phase\":\"Failed\"}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == true and .skipped == \"deleted\"" out &&
	get_w w1 &&
	jq -e ".status.phase == \"Available\"" w1.json
'

test_expect_success 'other lines pass through in order; a bad status line is reported and skipped' '
	uid=$(jq -r .metadata.uid w1.json) &&
	{
		echo "{\"type\":\"ADDED\",\"object\":{}}" &&
		status_line w1 "$uid" "{\"phase\":\"Processing\"}" &&
		echo "{\"op\":\"status\",\"object\":{\"kind\":\"Widget\"}}" &&
		echo "{\"op\":\"result\",\"for\":\"apply\",\"ok\":true}"
	} >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -c -s "map(.op // .type)" out >actual &&
	echo "[\"ADDED\",\"result\",\"result\",\"result\"]" >expect &&
	test_cmp expect actual &&
	jq -e -s ".[1].ok == true and .[2].ok == false and .[2].code == 400 and .[3].for == \"apply\"" out
'

test_expect_success 'cleanup' '
	ksim_stop
'

test_done
