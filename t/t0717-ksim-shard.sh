#!/bin/sh
test_description='shard selectors (KEP-5866): lib/shard.c and ksim with the ShardedListAndWatch gate on and off'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

command -v ksim >/dev/null || test_skip_all 'ksim not built'

lo="'0x0000000000000000'" mid="'0x8000000000000000'" top="'0x10000000000000000'"

# Inputs kube-apiserver's parser accepts, each with the form it echoes.
test_expect_success 'valid selectors parse to the canonical form the server echoes' '
	cat >expect <<-EOF &&
	shardRange(object.metadata.uid, $lo, $mid)
	shardRange(object.metadata.uid, $lo, $top)
	shardRange(object.metadata.namespace, $lo, $mid) || shardRange(object.metadata.namespace, $mid, $top)
	shardRange(object.metadata.uid, $lo, $mid)
	shardRange(object.metadata.uid, $lo, $mid)
	shardRange(object.metadata.namespace, $mid, $top)
	EOF
	{
		"$KOP_TEST_TOOL" shard-parse "shardRange(object.metadata.uid, $lo, $mid)" &&
		"$KOP_TEST_TOOL" shard-parse "shardRange(object.metadata.uid, $lo, $top)" &&
		"$KOP_TEST_TOOL" shard-parse "shardRange(object.metadata.namespace,$lo,$mid)||shardRange(object.metadata.namespace, $mid, $top)" &&
		"$KOP_TEST_TOOL" shard-parse "  shardRange( object.metadata.uid ,  $lo ,  $mid )  " &&
		"$KOP_TEST_TOOL" shard-parse "shardRange(object.metadata.uid, \"0x0000000000000000\", \"0x8000000000000000\")" &&
		"$KOP_TEST_TOOL" shard-parse "(shardRange(object.metadata.namespace, $mid, $top))"
	} >actual &&
	test_cmp expect actual
'

test_expect_success 'what the server refuses is refused, in its words' '
	cat >expect <<-\EOF &&
	error: empty shard selector is not allowed; omit the parameter for unfiltered lists
	error: hexStart must have '"'"'0x'"'"' prefix, got "0000000000000000"
	error: hexStart: hex value is required after '"'"'0x'"'"'
	error: unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace
	error: unsupported function "invalidFunc"; only shardRange() and || are allowed
	error: hexStart: hex value too long (18 chars, max 17): "000000000000000000"
	error: hexStart: invalid hex character "g" in "0x0g"
	error: unsupported function "_&&_"; only shardRange() and || are allowed
	error: hexStart must be a string literal, got int64
	error: unsupported function "_>_"; only shardRange() and || are allowed
	error: shardRange() requires exactly 3 arguments, got 2
	error: hexStart must be a string literal (e.g. '"'"'0xff'"'"'), got expression kind CallKind
	error: all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"
	error: hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)
	error: hexEnd must be a 0x-prefixed 16-digit hex value, got "0xff" (did you mean "0x00000000000000ff"?)
	error: shard range start 0x8000000000000000 must be less than end 0x8000000000000000
	error: shard range start 0xffffffffffffffff must be less than end 0x0000000000000000
	error: hexEnd: 17-digit hex value must be '"'"'0x10000000000000000'"'"' (2^64), got "0x10000000000000001"
	EOF
	for e in "   " \
		"shardRange(object.metadata.uid, '"'"'0000000000000000'"'"', $mid)" \
		"shardRange(object.metadata.uid, '"'"'0x'"'"', $mid)" \
		"shardRange(object.metadata.name, $lo, $mid)" \
		"invalidFunc(object.metadata.uid, $lo, $mid)" \
		"shardRange(object.metadata.uid, '"'"'0x000000000000000000'"'"', $mid)" \
		"shardRange(object.metadata.uid, '"'"'0x0g'"'"', $mid)" \
		"shardRange(object.metadata.uid, $lo, $mid) && shardRange(object.metadata.uid, $mid, $top)" \
		"shardRange(object.metadata.uid, 0, 8)" \
		"object.metadata.uid > $lo" \
		"shardRange(object.metadata.uid, $lo)" \
		"shardRange(object.metadata.uid, hex(0), $mid)" \
		"shardRange(object.metadata.uid, $lo, $mid) || shardRange(object.metadata.namespace, $mid, $top)" \
		"shardRange(object.metadata.uid, '"'"'0x0'"'"', $mid)" \
		"shardRange(object.metadata.uid, $lo, '"'"'0xff'"'"')" \
		"shardRange(object.metadata.uid, $mid, $mid)" \
		"shardRange(object.metadata.uid, '"'"'0xffffffffffffffff'"'"', $lo)" \
		"shardRange(object.metadata.uid, $lo, '"'"'0x10000000000000001'"'"')"
	do
		test_expect_code 1 "$KOP_TEST_TOOL" shard-parse "$e" || return 1
	done >actual &&
	test_cmp expect actual &&
	for e in "shardRange(" "shardRange(object.metadata.uid, $lo, $mid) )" "shardRange(object.metadata.uid, '"'"'0x0"
	do
		test_expect_code 1 "$KOP_TEST_TOOL" shard-parse "$e" || return 1
	done >syntax &&
	test $(wc -l <syntax) -eq 3 &&
	grep -c "^error: CEL parse error: Syntax error: " syntax >n &&
	echo 3 >expect &&
	test_cmp expect n
'

test_expect_success '64-bit FNV-1a, and equal ranges that cover the space' '
	cat >expect <<-\EOF &&
	cbf29ce484222325
	af63dc4c8601ec8c
	d0ba679834556c0b
	EOF
	{
		"$KOP_TEST_TOOL" shard-hash "" &&
		"$KOP_TEST_TOOL" shard-hash a &&
		"$KOP_TEST_TOOL" shard-hash test-uid-123
	} >actual &&
	test_cmp expect actual &&
	cat >expect <<-EOF &&
	shardRange(object.metadata.namespace, $lo, '"'"'0x5555555555555555'"'"')
	shardRange(object.metadata.namespace, '"'"'0x5555555555555555'"'"', '"'"'0xaaaaaaaaaaaaaaaa'"'"')
	shardRange(object.metadata.namespace, '"'"'0xaaaaaaaaaaaaaaaa'"'"', $top)
	shardRange(object.metadata.uid, $lo, $top)
	EOF
	{
		"$KOP_TEST_TOOL" shard-split namespace 0 3 &&
		"$KOP_TEST_TOOL" shard-split namespace 1 3 &&
		"$KOP_TEST_TOOL" shard-split namespace 2 3 &&
		"$KOP_TEST_TOOL" shard-split uid 0 1
	} >actual &&
	test_cmp expect actual
'

test_expect_success 'the selector of a set of ranges: neighbours joined, the rest or-ed, and it parses' '
	q="'"'"'" &&
	cat >expect <<-EOF &&
	shardRange(object.metadata.namespace, ${q}0x0000000000000000${q}, ${q}0x4000000000000000${q}) || shardRange(object.metadata.namespace, ${q}0x8000000000000000${q}, ${q}0x10000000000000000${q})
	shardRange(object.metadata.namespace, ${q}0x0000000000000000${q}, ${q}0x10000000000000000${q})
	shardRange(object.metadata.uid, ${q}0x4000000000000000${q}, ${q}0x8000000000000000${q})

	EOF
	{
		"$KOP_TEST_TOOL" shard-mask namespace d 4 &&
		"$KOP_TEST_TOOL" shard-mask namespace f 4 &&
		"$KOP_TEST_TOOL" shard-mask uid 2 4 &&
		"$KOP_TEST_TOOL" shard-mask namespace 0 4
	} >actual &&
	test_cmp expect actual &&
	"$KOP_TEST_TOOL" shard-parse "$(sed -n 1p actual)"
'

test_expect_success 'the ranges of one selector less another'"'"'s: what is left, cut where they overlap' '
	T="$KOP_TEST_TOOL" &&
	ns="object.metadata.namespace" &&
	{
		"$T" shard-minus "$("$T" shard-mask namespace ff 16)" "$("$T" shard-mask namespace 0c 16)" &&
		"$T" shard-minus "$("$T" shard-mask namespace 3 2)" "$("$T" shard-mask namespace 3 2)" &&
		"$T" shard-minus "$("$T" shard-mask namespace 1 2)" "$("$T" shard-mask namespace 2 2)" &&
		"$T" shard-minus "shardRange($ns, $lo, $top)" \
			"shardRange($ns, '"'"'0x0000000000000010'"'"', '"'"'0x0000000000000020'"'"') || shardRange($ns, $mid, $top)" &&
		"$T" shard-minus "shardRange($ns, $lo, $mid) || shardRange($ns, $mid, $top)" \
			"shardRange($ns, '"'"'0x7000000000000000'"'"', '"'"'0x9000000000000000'"'"')"
	} >actual &&
	cat >expect <<-EOF &&
	shardRange($ns, $lo, '"'"'0x2000000000000000'"'"') || shardRange($ns, '"'"'0x4000000000000000'"'"', $mid)

	shardRange($ns, $lo, $mid)
	shardRange($ns, $lo, '"'"'0x0000000000000010'"'"') || shardRange($ns, '"'"'0x0000000000000020'"'"', $mid)
	shardRange($ns, $lo, '"'"'0x7000000000000000'"'"') || shardRange($ns, '"'"'0x9000000000000000'"'"', $top)
	EOF
	test_cmp expect actual
'

test_expect_success 'an object matches by the hash of its field; a missing field hashes as ""' '
	for i in 0 1 2 3 4 5 6 7 8 9; do
		echo "{\"metadata\":{\"namespace\":\"ns-$i\",\"uid\":\"u-$i\"}}"
	done >objs &&
	echo "{\"metadata\":{}}" >>objs &&
	for i in 0 1 2 3 4 5 6 7 8 9; do
		"$KOP_TEST_TOOL" shard-hash "ns-$i" || return 1
	done >hashes &&
	"$KOP_TEST_TOOL" shard-hash "" >>hashes &&
	awk "{ print (substr(\$1, 1, 1) < \"8\") ? 1 : 0 }" hashes >expect &&
	"$KOP_TEST_TOOL" shard-match "shardRange(object.metadata.namespace, $lo, $mid)" <objs >actual &&
	test_cmp expect actual &&
	awk "{ print (substr(\$1, 1, 1) < \"8\") ? 0 : 1 }" hashes >expect &&
	"$KOP_TEST_TOOL" shard-match "shardRange(object.metadata.namespace, $mid, $top)" <objs >actual &&
	test_cmp expect actual
'

# ksim with the gate on: lists and watches of configmaps in 12 namespaces.
ksim_start --feature-gates ShardedListAndWatch=true || exit 1

list () {
	ksim_curl -G -f --data-urlencode "shardSelector=$1" "$2"
}

test_expect_success 'gate on: setup, 12 namespaces with a ConfigMap each' '
	for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
		ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"s-$i\"}}" /api/v1/namespaces &&
		ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"c\"}}" /api/v1/namespaces/s-$i/configmaps || return 1
	done
'

test_expect_success 'gate on: three ranges split the list exactly, each echoed in metadata.shardInfo' '
	ksim_curl -f /api/v1/configmaps >all.json &&
	jq -r "[.items[].metadata | select(.name == \"c\") | .namespace] | sort[]" all.json >all &&
	test $(wc -l <all) -eq 12 &&
	: >union &&
	for i in 0 1 2; do
		sel=$("$KOP_TEST_TOOL" shard-split namespace $i 3) &&
		list "$sel" /api/v1/configmaps >part$i.json &&
		jq -r ".metadata.shardInfo.selector" part$i.json >echo &&
		echo "$sel" >expect &&
		test_cmp expect echo &&
		jq -c ".items[] | {metadata: {namespace: .metadata.namespace}}" part$i.json >objs &&
		"$KOP_TEST_TOOL" shard-match "$sel" <objs >match &&
		! grep -v "^1\$" match &&
		jq -r ".items[].metadata | select(.name == \"c\") | .namespace" part$i.json >>union || return 1
	done &&
	sort union >actual &&
	test_cmp all actual &&
	test $(wc -l <union) -eq 12
'

test_expect_success 'gate on: a list by pages with a selector carries no remainingItemCount' '
	sel=$("$KOP_TEST_TOOL" shard-split namespace 0 2) &&
	ksim_curl -G -f --data-urlencode "shardSelector=$sel" --data-urlencode limit=1 /api/v1/configmaps >page.json &&
	jq -e ".metadata.continue and (.metadata | has(\"remainingItemCount\") | not)" page.json
'

test_expect_success 'gate on: a watch sends only the events in its ranges' '
	sel=$("$KOP_TEST_TOOL" shard-split namespace 1 2) &&
	ksim_curl -G --data-urlencode "shardSelector=$sel" --data-urlencode watch=true \
		--data-urlencode timeoutSeconds=2 /api/v1/configmaps >watch.jsonl &&
	jq -c "{metadata: {namespace: .object.metadata.namespace}}" watch.jsonl >objs &&
	test -s objs &&
	"$KOP_TEST_TOOL" shard-match "$sel" <objs >match &&
	! grep -v "^1\$" match &&
	list "$sel" /api/v1/configmaps >part.json &&
	jq -r ".items[].metadata.namespace" part.json | sort >expect &&
	jq -r ".object.metadata.namespace" watch.jsonl | sort >actual &&
	test_cmp expect actual
'

test_expect_success 'gate on: a selector the server cannot parse is a 500 naming it' '
	ksim_curl -G -o bad.json -w "%{http_code}\n" --data-urlencode "shardSelector=shardRange(object.metadata.name, $lo, $mid)" \
		/api/v1/configmaps >code &&
	echo 500 >expect &&
	test_cmp expect code &&
	jq -r ".message, has(\"reason\")" bad.json >actual &&
	cat >expect <<-\EOF &&
	invalid shard selector: unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace
	false
	EOF
	test_cmp expect actual &&
	ksim_curl -G -o bad.json -w "%{http_code}\n" --data-urlencode "shardSelector=shardRange(" \
		--data-urlencode watch=true /api/v1/configmaps >code &&
	echo 500 >expect &&
	test_cmp expect code
'

test_expect_success 'gate on: an empty selector is no selector' '
	ksim_curl -f "/api/v1/configmaps?shardSelector=" >empty.json &&
	jq -e "(.metadata | has(\"shardInfo\") | not) and (.items | length) >= 12" empty.json
'

test_expect_success 'gate on: stop' 'ksim_stop'

ksim_start || exit 1

test_expect_success 'gate off (the default): the parameter is ignored, nothing echoed' '
	ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"c\"}}" /api/v1/namespaces/default/configmaps &&
	sel=$("$KOP_TEST_TOOL" shard-split namespace 0 1000) &&
	list "$sel" /api/v1/configmaps >off.json &&
	jq -e "(.metadata | has(\"shardInfo\") | not) and ([.items[] | select(.metadata.name == \"c\")] | length) == 1" off.json &&
	list "shardRange(" /api/v1/configmaps >/dev/null
'

test_expect_success 'unknown feature gates are refused' '
	test_expect_code 100 "$KOP_BIN/ksim" --feature-gates Nope=true 2>err &&
	grep "unrecognized feature gate: Nope" err &&
	test_expect_code 100 "$KOP_BIN/ksim" --feature-gates ShardedListAndWatch=maybe 2>err &&
	grep "ShardedListAndWatch=maybe" err
'

test_expect_success 'gate off: stop' 'ksim_stop'

test_done
