#!/bin/sh
test_description='strategic merge patch: list merge keys of built-in kinds and the $patch directives'
. "${0%/*}/test-lib.sh"

# Each case is NN-name.json {"target":…,"patch":…} with NN-name.expect (the
# patched document) or NN-name.err (the error; exit 1).
for f in "$FIXTURES"/*.json
do
	name=$(basename "$f" .json)
	if test -f "$FIXTURES/$name.err"
	then
		test_expect_success "strategic merge patch fails: $name" '
			jq ".target" "$f" >target.json &&
			jq ".patch" "$f" >patch.json &&
			test_expect_code 1 "$KOP_TEST_TOOL" smp target.json patch.json >actual &&
			test_cmp_golden "$FIXTURES/$name.err" actual
		'
	else
		test_expect_success "strategic merge patch: $name" '
			jq ".target" "$f" >target.json &&
			jq ".patch" "$f" >patch.json &&
			"$KOP_TEST_TOOL" smp target.json patch.json >actual &&
			test_cmp_json "$FIXTURES/$name.expect" actual
		'
	fi
done

test_done
