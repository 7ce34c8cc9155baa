#!/bin/sh
test_description='server-side apply and managedFields: create, no-op, conflicts, force, removal, shared ownership, sets, map lists, update tracking'
. "${0%/*}/test-lib.sh"

# Each case is NN-name.json {"schema"?, "steps":[{op, manager, object, force?,
# subresource?, time?}]}; NN-name.expect holds one line per step: the object
# and its managedFields ("managed"), or the conflict or error.
for f in "$FIXTURES"/*.json
do
	name=$(basename "$f" .json)
	test_expect_success "ssa: $name" '
		"$KOP_TEST_TOOL" ssa-steps "$f" >actual &&
		test_cmp_json "$FIXTURES/$name.expect" actual
	'
done

# The same answers as a real kube-apiserver, taken from the recordings.
# managedFields a client sends with no other change are stored as kube-apiserver
# stores what it decodes (each set in its order), and stay so through later
# writes that do not touch them; ones that do not decode (a set holding a
# number) are taken as not sent (decodeLiveOrNew), never kept to abort a
# later write. Key order matters here: not test_cmp_json, which sorts.
test_expect_success 'managedFields sent by a client: stored in order; what does not decode is not taken' '
	"$KOP_TEST_TOOL" ssa-steps "$FIXTURES/client-managed-fields.steps" >actual &&
	jq -c "[.managed[] | [.manager, .fieldsV1]]" actual >got &&
	cat >expect <<-\EOF &&
	[["a",{"f:data":{".":{},"f:a":{},"f:b":{}}}]]
	[["a",{"f:data":{"f:a":{},"f:b":{}}}]]
	[["a",{"f:data":{"f:a":{},"f:b":{}}}],["b",{"f:metadata":{"f:labels":{".":{},"f:x":{}}}}]]
	[["a",{"f:data":{"f:a":{},"f:b":{}}}],["b",{"f:metadata":{"f:labels":{".":{},"f:x":{}}}}]]
	[["a",{"f:data":{"f:a":{}}}],["b",{"f:data":{"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}]]
	EOF
	test_cmp expect got
'

test_expect_success 'apply of the recorded Deployment gives the recorded fieldsV1' '
	"$KOP_TEST_TOOL" ssa-steps "$FIXTURES/01-create-deployment.json" >actual &&
	jq -S -c ".managed[0].fieldsV1" actual >got &&
	head -n 1 "$TEST_DATA/recordings/deployment/deployments.watch.jsonl" >first &&
	jq -S -c ".object.metadata.managedFields[0].fieldsV1" first >want &&
	test_cmp want got
'

test_expect_success 'conflict message and forced managedFields as recorded' '
	"$KOP_TEST_TOOL" ssa-steps "$FIXTURES/03-conflict-then-force.json" >actual &&
	sed -n 2p actual >conflict &&
	jq -r .message conflict >got-msg &&
	jq -S -c .causes conflict >got-causes &&
	grep "^{" "$TEST_DATA/recordings/errors/409-apply-conflict.http.txt" >rec409 &&
	jq -r .message rec409 >want-msg &&
	jq -S -c .details.causes rec409 >want-causes &&
	test_cmp want-msg got-msg &&
	test_cmp want-causes got-causes &&
	sed -n 3p actual >forced &&
	jq -S -c "[.managed[] | del(.time)]" forced >got-mf &&
	grep "^{" "$TEST_DATA/recordings/errors/200-apply-forced.http.txt" >rec200 &&
	jq -S -c "[.metadata.managedFields[] | del(.time)]" rec200 >want-mf &&
	test_cmp want-mf got-mf
'

test_expect_success 'update tracking follows the recorded custom object' '
	"$KOP_TEST_TOOL" ssa-steps "$FIXTURES/11-update-tracking-recorded-widget.json" >actual &&
	jq -S -c ".managed" actual >got &&
	head -n 3 "$TEST_DATA/recordings/custom/widgets.watch.jsonl" >rec &&
	jq -S -c ".object.metadata.managedFields" rec >want &&
	test_cmp want got
'

test_expect_success 'ssa-apply: conflict exits 1, force wins' '
	cat >live.json <<-\EOF &&
	{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","managedFields":[
	 {"manager":"one","operation":"Apply","apiVersion":"v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:k":{}}}}]},
	 "data":{"k":"mine"}}
	EOF
	echo "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\"},\"data\":{\"k\":\"theirs\"}}" >applied.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" ssa-apply live.json applied.json two >out &&
	jq -e ".message == \"Apply failed with 1 conflict: conflict with \\\"one\\\": .data.k\"" out &&
	"$KOP_TEST_TOOL" ssa-apply live.json applied.json two force >out &&
	jq -e ".object.data.k == \"theirs\" and (.managed | length) == 1 and .managed[0].manager == \"two\"" out
'

test_done
