#!/bin/sh
test_description='JSON merge patch (RFC 7386): the RFC appendix examples and Kubernetes cases'
. "${0%/*}/test-lib.sh"

# Each case is NN-name.json {"target":…,"patch":…} with NN-name.expect.
for f in "$FIXTURES"/*.json
do
	name=$(basename "$f" .json)
	test_expect_success "merge patch: $name" '
		jq ".target" "$f" >target.json &&
		jq ".patch" "$f" >patch.json &&
		"$KOP_TEST_TOOL" merge-patch target.json patch.json >actual &&
		test_cmp_json "$FIXTURES/$name.expect" actual
	'
done

test_done
