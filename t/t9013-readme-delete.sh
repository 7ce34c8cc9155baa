#!/bin/sh
test_description='README "Deleting it": its commands, as written there, delete the example alone'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

# Another IoTService in the same namespace, which the README's commands must leave alone.
OTHER=other-iotservice
OTHER_PATH=/apis/cp.iot.sap/v1/namespaces/$O/iotservices/$OTHER

e2e_ksim_start

# The first sh block after the heading "### Deleting it", as it is written.
test_expect_success 'the README has the delete commands' '
	awk "/^### Deleting it\$/ { sect = 1; next }
	     sect && /^#/ { exit }
	     sect && /^\`\`\`sh\$/ { inblock = 1; next }
	     inblock && /^\`\`\`\$/ { exit }
	     inblock { print }" "$PROJECT_ROOT/README.md" >delete.sh &&
	test -s delete.sh &&
	grep -q "kapply" delete.sh &&
	cat delete.sh
'

# other_is PHASE: the other IoTService is about its generation and in PHASE
other_is () {
	ksim_curl -o other.json "$OTHER_PATH" &&
	jq -e --arg phase "$1" ".status.observedGeneration == .metadata.generation and .status.phase == \$phase" \
		other.json >/dev/null
}

# ns_there NAME: the namespace exists and is not being deleted
ns_there () {
	ksim_curl -f -o ns.json "/api/v1/namespaces/$1" 2>/dev/null &&
	jq -e ".metadata.deletionTimestamp == null" ns.json >/dev/null
}

ns_gone () {
	! ksim_curl -f -o /dev/null "/api/v1/namespaces/$1" 2>/dev/null
}

iot_gone () {
	! ksim_curl -f -o /dev/null "$1" 2>/dev/null
}

test_expect_success 'setup: deploy/, the operator, the example and another IoTService, both Available' '
	e2e_install &&
	e2e_operator_start op &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >/dev/null &&
	sed "s/name: example-iotservice/name: $OTHER/" "$PROJECT_ROOT/deploy/example-iotservice.yaml" | k apply -f - >/dev/null &&
	test_wait_for 120 status_is Available &&
	test_wait_for 120 other_is Available &&
	other_is Available &&
	ns_there $I &&
	ns_there $O-$OTHER &&
	jq -r .metadata.uid other.json >other.uid
'

test_expect_success 'the README'"'"'s commands, as the admin: the example and its namespace go, the other stays' '
	(
		PATH="$KOP_BIN:$PATH" &&
		export PATH &&
		sh -e delete.sh >delete.out 2>delete.err
	) &&
	# the one delete was the example, by its uid
	# (the result lines of kapply, among the names the last command prints)
	jq -R -c "fromjson? | select(type == \"object\" and .op == \"result\") | [.for, .ok, .ref.name]" \
		delete.out >results &&
	echo "[\"delete\",true,\"$X\"]" >expect &&
	test_cmp expect results &&
	test_wait_for 60 iot_gone "$IOT_PATH" &&
	test_wait_for 60 ns_gone $I &&
	ns_gone $I &&
	# the other IoTService, the same object, and its namespace, untouched
	ksim_curl -f -o other.json "$OTHER_PATH" &&
	jq -r .metadata.uid other.json >actual &&
	test_cmp other.uid actual &&
	jq -e ".metadata.deletionTimestamp == null" other.json &&
	other_is Available &&
	ns_there $O-$OTHER
'

test_expect_success 'stop' '
	e2e_operator_stop op &&
	ksim_stop
'

test_done
