#!/bin/sh
test_description='ireconcile lib: hash map, desired-subset-of-live, program mappings'
. "${0%/*}/test-lib.sh"

for seed in 1 2 3
do
	test_expect_success "hash map against a plain array (seed $seed)" '
		"$KOP_TEST_TOOL" hmap-stress 200000 $seed >out &&
		echo ok >expect &&
		test_cmp expect out
	'
done

test_expect_success 'desired is a subset of live: objects by key, arrays by position, null = absent' '
	"$KOP_TEST_TOOL" json-subset <"$FIXTURES/subset.jsonl" >out &&
	test_cmp "$FIXTURES/subset.expect" out
'

test_expect_success 'label mapping: name label, fixed namespace, every match label' '
	WIDGET_TEAM=blue "$KOP_TEST_TOOL" program-map "$PROJECT_ROOT/t/t2001-ireconcile-engine/widgets" \
		<"$FIXTURES/map.jsonl" >out &&
	test_cmp "$FIXTURES/map.expect" out
'

test_expect_success 'owner reference mapping: the controller of the primary kind and group only' '
	"$KOP_TEST_TOOL" program-map "$PROJECT_ROOT/t/t2003-ireconcile-recorded/rollout" \
		<"$FIXTURES/map-owner.jsonl" >out &&
	test_cmp "$FIXTURES/map-owner.expect" out
'

test_done
