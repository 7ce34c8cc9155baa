#!/bin/sh
test_description='ireconcile lib: hash map, desired-subset-of-live, program mappings'
. "${0%/*}/test-lib.sh"

for seed in 1 2 3
do
	test_expect_success "hash map against a plain array, then emptied and fit to what is left (seed $seed)" '
		"$KOP_TEST_TOOL" hmap-stress 200000 $seed >out &&
		echo ok >expect &&
		test_cmp expect out
	'
done

# ireconcile's view keys its objects by their own keys, borrowed (kop_hmap_borrow_keys)
test_expect_success 'hash map borrowing its keys: each entry holds the very key put, none freed by the map' '
	"$KOP_TEST_TOOL" hmap-stress --borrow 200000 4 >out &&
	echo ok >expect &&
	test_cmp expect out
'

test_expect_success 'desired is a subset of live: objects by key, arrays by position, null = absent' '
	"$KOP_TEST_TOOL" json-subset <"$FIXTURES/subset.jsonl" >out &&
	test_cmp "$FIXTURES/subset.expect" out
'

test_expect_success 'fingerprints: strings of 128 bytes or more and marked ones become their SHA-256, nothing else' '
	"$KOP_TEST_TOOL" json-fingerprint <"$FIXTURES/fp.jsonl" >out &&
	test_cmp "$FIXTURES/fp.expect" out
'

test_expect_success 'fingerprints: a scan of the text skips only values with nothing to fingerprint' '
	"$KOP_TEST_TOOL" json-fp-scan <"$FIXTURES/fp-scan.jsonl" >out &&
	test_cmp "$FIXTURES/fp-scan.expect" out &&
	"$KOP_TEST_TOOL" json-fp-scan <"$FIXTURES/fp.jsonl" >out &&
	! grep "^skip changed" out
'

test_expect_success 'desired against a fingerprinted live object: every pair answers as unfingerprinted' '
	"$KOP_TEST_TOOL" json-subset --fp <"$FIXTURES/subset.jsonl" >out &&
	test_cmp "$FIXTURES/subset.expect" out &&
	"$KOP_TEST_TOOL" json-subset <"$FIXTURES/fp-subset.jsonl" >out &&
	test_cmp "$FIXTURES/fp-subset.expect" out &&
	"$KOP_TEST_TOOL" json-subset --fp <"$FIXTURES/fp-subset.jsonl" >out &&
	test_cmp "$FIXTURES/fp-subset.expect" out
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

test_expect_success 'templates: settings filled in everywhere but in a kind'"'"'s jq projection; {{ is a brace' '
	TMPL_TEAM=blue ireconcile --print-watches "$FIXTURES/tmpl" >watches &&
	cat >expect <<-\EOF &&
	{"resource":"widgets.test.example.org","namespace":"blue","labelSelector":"","fieldSelector":"","role":"primary"}
	{"resource":"pods","namespace":"","labelSelector":"literal={x},project=blue","fieldSelector":"","role":"observed"}
	EOF
	test_cmp expect watches &&
	echo "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\",\"namespace\":\"blue\"}}}" >in &&
	TMPL_TEAM=blue ireconcile "$FIXTURES/tmpl" <in >out 2>err &&
	! test -s out
'

test_expect_success 'an unknown setting in a template is refused (100)' '
	mkdir bad && sed "s/{team}\"}/{nope}\"}/" "$FIXTURES/tmpl/program.yml" >bad/program.yml &&
	cp "$FIXTURES/tmpl/sync.jq" bad/ &&
	TMPL_TEAM=blue test_expect_code 100 ireconcile --print-watches bad 2>err &&
	grep "unknown or empty setting .nope." err
'

test_done
