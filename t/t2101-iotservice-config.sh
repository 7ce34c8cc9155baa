#!/bin/sh
test_description='pipeline/iotservice: config.yml byte for byte as the original (spec/vectors), lib/render functions'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-iotservice.sh"

# The config.yml of a vector input, rendered by the program's own jq
# (spec.jq + config.jq) and lib/render.c's YAML emitter. The instance
# namespace is O-X with O the object's namespace, as the vectors were made.
render_config () {
	jq -c -L "$PROJECT_ROOT/pipeline/lib" -L "$IOT_PROGRAM" \
		'include "spec"; include "config";
		 .metadata.name as $x | iot_config(.spec | iot_spec; $x; "\(.metadata.namespace)-\($x)")' \
		<"$IOT_VECTORS/$1.json" >"$1.config.json" &&
	"$KOP_TEST_TOOL" yaml-render <"$1.config.json" >"$1.config.yml"
}

for v in minimal-v1 minimal-v1alpha1 example-iotservice edge-v1
do
	test_expect_success "config.yml of $v is byte-identical to the vector" "
		render_config $v &&
		test_cmp '$IOT_VECTORS/$v.config.yml' $v.config.yml
	"
	test_expect_success "MD5 of $v's config.yml matches MD5SUMS" "
		grep ' $v.config.yml\$' '$IOT_VECTORS/MD5SUMS' >expect &&
		md5sum $v.config.yml >actual &&
		test_cmp expect actual
	"
done

test_expect_success 'the md5 directive gives the same checksum as MD5SUMS' '
	jq -c "{\"\$fn\": \"md5\", arg: {\"\$fn\": \"yaml\", arg: .}}" example-iotservice.config.json >fn.json &&
	"$KOP_TEST_TOOL" fn-resolve <fn.json >actual &&
	echo "\"$(sed -n "s/  example-iotservice.config.yml\$//p" "$IOT_VECTORS/MD5SUMS")\"" >expect &&
	test_cmp expect actual
'

test_expect_success 'base64 of the yaml directive decodes to the vector bytes' '
	jq -c "{\"\$fn\": \"base64\", arg: {\"\$fn\": \"yaml\", arg: .}}" edge-v1.config.json >fn.json &&
	"$KOP_TEST_TOOL" fn-resolve <fn.json >b64.json &&
	jq -r . b64.json | base64 -d >decoded &&
	test_cmp "$IOT_VECTORS/edge-v1.config.yml" decoded
'

test_expect_success 'scalar styles follow yaml.v2 (quoting, literal blocks, folding)' '
	"$KOP_TEST_TOOL" yaml-render <"$FIXTURES/scalars.json" >actual &&
	test_cmp "$FIXTURES/scalars.expect.yml" actual
'

# "1e3" is left out: yaml.v2 reads it as a string (its float pattern wants a
# signed exponent), lib/yaml as a number.
test_expect_success 'the YAML reads back (lib/yaml) as the same JSON value' '
	"$KOP_TEST_TOOL" yaml-render <"$FIXTURES/scalars.json" >out.yml &&
	"$KOP_TEST_TOOL" yaml out.yml >back.json &&
	jq -S -c "del(.[\"1e3\"])" "$FIXTURES/scalars.json" >expect &&
	jq -S -c "del(.[\"1e3\"], .[\"1000\"])" back.json >actual &&
	test_cmp expect actual
'

test_expect_success 'md5, sha256 and base64 of known strings' '
	echo "\"abc\"" >abc.json &&
	"$KOP_TEST_TOOL" fn-call md5 <abc.json >md5 &&
	"$KOP_TEST_TOOL" fn-call sha256 <abc.json >sha &&
	"$KOP_TEST_TOOL" fn-call base64 <abc.json >b64 &&
	echo "\"hello world\"" | "$KOP_TEST_TOOL" fn-call base64 >b64b &&
	echo "\"\"" | "$KOP_TEST_TOOL" fn-call base64 >b64c &&
	cat md5 sha b64 b64b b64c >actual &&
	cat >expect <<-\EOT &&
	"900150983cd24fb0d6963f7d28e17f72"
	"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	"YWJj"
	"aGVsbG8gd29ybGQ="
	""
	EOT
	test_cmp expect actual
'

test_expect_success 'directives resolve innermost first, anywhere in a value' '
	cat >in.jsonl <<-\EOT &&
	{"a":[1,{"$fn":"md5","arg":{"$fn":"yaml","arg":{"k":"v"}}}],"b":{"$fn":"base64","arg":"x"},"c":{"$fn":"md5","arg":"x","other":1}}
	EOT
	"$KOP_TEST_TOOL" fn-resolve <in.jsonl >actual &&
	echo "{\"a\":[1,\"$(printf "k: v\n" | md5sum | cut -d" " -f1)\"],\"b\":\"eA==\",\"c\":{\"\$fn\":\"md5\",\"arg\":\"x\",\"other\":1}}" >expect &&
	test_cmp expect actual
'

test_expect_success 'repeated directives give the same result, different ones their own' '
	echo "[{\"\$fn\":\"md5\",\"arg\":\"a\"},{\"\$fn\":\"md5\",\"arg\":\"b\"},{\"\$fn\":\"md5\",\"arg\":\"a\"},{\"\$fn\":\"base64\",\"arg\":\"a\"}]" >rep.jsonl &&
	"$KOP_TEST_TOOL" fn-resolve <rep.jsonl >actual &&
	echo "[\"$(printf a | md5sum | cut -d" " -f1)\",\"$(printf b | md5sum | cut -d" " -f1)\",\"$(printf a | md5sum | cut -d" " -f1)\",\"YQ==\"]" >expect &&
	test_cmp expect actual
'

test_expect_success 'equal arguments in another key order get their own YAML (and checksum)' '
	echo "{\"b\":{\"\$fn\":\"yaml\",\"arg\":{\"y\":2,\"x\":1}},\"a\":{\"\$fn\":\"yaml\",\"arg\":{\"x\":1,\"y\":2}}}" >order.jsonl &&
	"$KOP_TEST_TOOL" fn-resolve <order.jsonl >actual &&
	cat >expect <<-\EOF &&
	{"b":"\"y\": 2\nx: 1\n","a":"x: 1\n\"y\": 2\n"}
	EOF
	test_cmp expect actual
'

# jq hands the same value wherever a variable stands (iotservice's checksum
# in eight pod templates): resolved once, it must still be right at each
# place, and too deep at one of them still too deep.
test_expect_success 'a directive shared as jq shares values: its result at every place, the depth limit at each' '
	echo "{\"x\":{\"a\":{\"b\":{\"c\":1}}}}" >shared.jsonl &&
	"$KOP_TEST_TOOL" fn-resolve --jq "{\"\$fn\": \"md5\", arg: {\"\$fn\": \"yaml\", arg: .x}} as \$d | [\$d, {k: \$d}, [[\$d]]]" \
		<shared.jsonl >actual &&
	sum=$(printf "a:\n  b:\n    c: 1\n" | md5sum | cut -d" " -f1) &&
	echo "[\"$sum\",{\"k\":\"$sum\"},[[\"$sum\"]]]" >expect &&
	test_cmp expect actual &&
	echo "{\"x\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":1}}}}}}}}" >deep.jsonl &&
	"$KOP_TEST_TOOL" fn-resolve --jq "{\"\$fn\": \"yaml\", arg: .x} as \$d | [\$d, (reduce range(0; 500) as \$i (\$d; [.]))]" \
		<deep.jsonl >resolved &&
	sed -n "s/^\(.\{10\}\).*/\1/p" resolved >actual &&
	cat >expect <<-\EOF &&
	["a:\n  b:
	EOF
	test_cmp expect actual &&
	test_expect_code 1 "$KOP_TEST_TOOL" fn-resolve \
		--jq "{\"\$fn\": \"yaml\", arg: .x} as \$d | [\$d, (reduce range(0; 505) as \$i (\$d; [.]))]" \
		<deep.jsonl 2>err &&
	grep "value nested deeper than 512 levels" err
'

test_expect_success 'an unknown function or a bad argument is an error naming it' '
	echo "{\"\$fn\":\"sha1\",\"arg\":\"x\"}" >bad1.jsonl &&
	echo "{\"\$fn\":\"md5\",\"arg\":[1]}" >bad2.jsonl &&
	test_expect_code 1 "$KOP_TEST_TOOL" fn-resolve <bad1.jsonl 2>err1 &&
	test_expect_code 1 "$KOP_TEST_TOOL" fn-resolve <bad2.jsonl 2>err2 &&
	grep "unknown function .sha1." err1 &&
	grep "function .md5. needs a string, not array" err2
'

# ireconcile keeps a render answer packed (lib/render.h, kop_fn_pack): base64 of text as the
# directive that makes it, which compresses to little; resolving it must give back every byte.
test_expect_success 'packed, base64 of text is kept as the directive that makes it, and resolves to the same bytes' '
	jq -c "{\"\$fn\": \"base64\", arg: {\"\$fn\": \"yaml\", arg: .}}" edge-v1.config.json >fn.json &&
	"$KOP_TEST_TOOL" fn-resolve <fn.json >b64.json &&
	short=$(printf hi | base64) &&
	binary=$(printf "\377%.0s" $(seq 150) | base64 -w 0) &&
	lined=$(base64 -w 76 "$IOT_VECTORS/edge-v1.config.yml" | head -n 3) &&
	jq -c --arg short "$short" --arg binary "$binary" --arg lined "$lined" \
		"{s: ., a: [1, ., {short: \$short}], binary: \$binary, unpadded: (.[0:-4] + .[-4:] | rtrimstr(\"=\")),
		  lined: \$lined, plain: (\"not base64, \" * 20)}" b64.json >value.json &&
	"$KOP_TEST_TOOL" fn-resolve --pack <value.json >packed.json &&
	jq -e --rawfile text "$IOT_VECTORS/edge-v1.config.yml" --slurpfile v value.json "
		\$v[0] as \$v | .s == {\"\$fn\": \"base64\", arg: \$text} and .a == [1, .s, {short: \$v.a[2].short}]
		and ([.binary, .unpadded, .lined, .plain] == [\$v.binary, \$v.unpadded, \$v.lined, \$v.plain])
		and (\$v.unpadded | length) % 4 != 0 and (\$v.lined | contains(\"\n\"))" packed.json &&
	test "$(wc -c <packed.json)" -lt "$(wc -c <value.json)" &&
	"$KOP_TEST_TOOL" fn-resolve <packed.json >resolved.json &&
	test_cmp value.json resolved.json
'

test_expect_success 'quantities are canonicalised as the API server stores them' '
	while read in want
	do
		jq -n -c -L "$PROJECT_ROOT/pipeline/lib" --arg q "$in" "include \"kop\"; \$q | kop_quantity" >got &&
		if test "$want" = null; then echo null; else echo "\"$want\""; fi >want.json &&
		test_cmp want.json got || return 1
	done <"$FIXTURES/quantities.txt"
'

test_expect_success 'kop_epoch: RFC 3339 UTC times with or without a fraction, null otherwise' '
	jq -c -L "$PROJECT_ROOT/pipeline/lib" "include \"kop\"; [.[] | kop_epoch]" >got <<-\EOT &&
	["2026-11-22T10:00:00Z", "2026-11-22T10:00:00.123456Z", "1970-01-01T00:00:00Z",
	 "2026-11-22T10:00:00.Z", "2026-11-22T10:00:00xZ", "2026-11-22T10:00:00+01:00",
	 "2026-11-22T10:00:00.12aZ", "2026-11-22", "", 5, null]
	EOT
	echo "[1795341600,1795341600,0,null,null,null,null,null,null,null,null]" >want &&
	test_cmp want got
'

test_done
