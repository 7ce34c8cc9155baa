#!/bin/sh
test_description='CRD structural schemas: defaulting, pruning, validation causes and the 422 message'
. "${0%/*}/test-lib.sh"

# Each case is NN-OP-name.json {"op":"default|prune|validate","schema":…,"object":…}
# with NN-OP-name.expect (validate: {"causes":…,"message":…}).
for f in "$FIXTURES"/*.json
do
	name=$(basename "$f" .json)
	test_expect_success "schema: $name" '
		op=$(jq -r .op "$f") &&
		jq .schema "$f" >schema.json &&
		jq .object "$f" >object.json &&
		"$KOP_TEST_TOOL" schema-$op schema.json object.json >actual &&
		test_cmp_json "$FIXTURES/$name.expect" actual
	'
done

test_expect_success 'the 422 message and causes are the recorded ones' '
	f="$FIXTURES/08-validate-recorded-enum-and-type.json" &&
	jq .schema "$f" >schema.json &&
	jq .object "$f" >object.json &&
	"$KOP_TEST_TOOL" schema-validate schema.json object.json >actual &&
	grep "^{" "$TEST_DATA/recordings/errors/422-invalid.http.txt" >rec &&
	jq -r .message rec >want-msg &&
	jq -r .message actual >got-msg &&
	test_cmp want-msg got-msg &&
	jq -S -c .details.causes rec >want-causes &&
	jq -S -c .causes actual >got-causes &&
	test_cmp want-causes got-causes
'

test_expect_success 'schema listinfo: list types, map keys and their defaults, atomic maps' '
	cat >schema.json <<-\EOF &&
	{"type":"object","properties":{"spec":{"type":"object","properties":{
	  "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["port","protocol"],
	    "items":{"type":"object","properties":{"port":{"type":"integer"},"protocol":{"type":"string","default":"TCP"},
	      "hosts":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}}}}},
	  "sel":{"type":"object","x-kubernetes-map-type":"atomic"},
	  "args":{"type":"array","x-kubernetes-list-type":"atomic","items":{"type":"string"}}}}}}
	EOF
	"$KOP_TEST_TOOL" schema-listinfo schema.json >actual &&
	cat >expect <<-\EOF &&
	{"metadata.finalizers":{"type":"set"},"metadata.managedFields":{"type":"atomic"},
	 "metadata.ownerReferences":{"keys":["uid"],"type":"map"},
	 "spec.args":{"type":"atomic"},
	 "spec.ports":{"defaults":{"protocol":"TCP"},"keys":["port","protocol"],"type":"map"},
	 "spec.ports[].hosts":{"type":"set"},
	 "spec.sel":{"type":"atomic"}}
	EOF
	test_cmp_json expect actual
'

test_done
