#!/bin/sh
test_description='JSON patch (RFC 6902): the RFC appendix examples, every op and the errors'
. "${0%/*}/test-lib.sh"

# Each case is NN-name.json {"target":…,"ops":…} with NN-name.expect (the
# patched document) or NN-name.err (the error; exit 1).
for f in "$FIXTURES"/*.json
do
	name=$(basename "$f" .json)
	if test -f "$FIXTURES/$name.err"
	then
		test_expect_success "json patch fails: $name" '
			jq ".target" "$f" >target.json &&
			jq ".ops" "$f" >ops.json &&
			test_expect_code 1 "$KOP_TEST_TOOL" json-patch target.json ops.json >actual &&
			test_cmp_golden "$FIXTURES/$name.err" actual
		'
	else
		test_expect_success "json patch: $name" '
			jq ".target" "$f" >target.json &&
			jq ".ops" "$f" >ops.json &&
			"$KOP_TEST_TOOL" json-patch target.json ops.json >actual &&
			test_cmp_json "$FIXTURES/$name.expect" actual
		'
	fi
done

test_done
