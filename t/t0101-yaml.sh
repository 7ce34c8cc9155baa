#!/bin/sh
test_description='lib/yaml: YAML to JSON as Kubernetes (sigs.k8s.io/yaml) reads it'
. "${0%/*}/test-lib.sh"

for name in scalars anchors multi; do
	test_expect_success "$name.yaml reads as $name.expect" '
		"$KOP_TEST_TOOL" yaml "$FIXTURES/'$name'.yaml" >out &&
		jq -S -c . "$FIXTURES/'$name'.expect" >expect &&
		jq -S -c . out >actual &&
		test_cmp expect actual
	'
done

test_expect_success 'an empty file and a file of comments give no documents' '
	: >empty.yaml &&
	"$KOP_TEST_TOOL" yaml empty.yaml >out &&
	test ! -s out &&
	printf "# nothing\n---\n---\n" >comments.yaml &&
	"$KOP_TEST_TOOL" yaml comments.yaml >out &&
	test ! -s out
'

test_expect_success 'a bad document is an error naming the file, line and column' '
	test_expect_code 1 "$KOP_TEST_TOOL" yaml "$FIXTURES/bad-indent.yaml" >out &&
	echo "error: unable to parse '\''$FIXTURES/bad-indent.yaml'\'': line 5, column 2: did not find expected key" >expect &&
	test_cmp expect out
'

test_expect_success 'an error in a later document fails the whole file' '
	printf "a: 1\n---\nb: [1, 2\n" >two.yaml &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml two.yaml >out &&
	grep "^error: unable to parse '\''two.yaml'\'': line 4, column 1: " out
'

test_expect_success 'unknown anchors, .inf, bad tagged values and collection keys are errors' '
	printf "a: *nope\n" | test_expect_code 1 "$KOP_TEST_TOOL" yaml >out &&
	echo "error: unable to parse '\''<input>'\'': line 1, column 4: unknown anchor '\''nope'\'' referenced" >expect &&
	test_cmp expect out &&
	printf "x: .inf\n" | test_expect_code 1 "$KOP_TEST_TOOL" yaml >out &&
	grep "line 1, column 4: x: an infinity or NaN has no JSON representation$" out &&
	printf "x: [!!int abc]\n" | test_expect_code 1 "$KOP_TEST_TOOL" yaml >out &&
	grep "line 1, column 5: x\[0\]: cannot decode the value as tag:yaml.org,2002:int$" out &&
	printf "? [a]\n: 1\n" | test_expect_code 1 "$KOP_TEST_TOOL" yaml >out &&
	grep "line 1, column 3: unsupported mapping key" out &&
	printf "~: 1\n" | test_expect_code 1 "$KOP_TEST_TOOL" yaml >out &&
	grep "unsupported mapping key" out
'

test_expect_success 'a billion laughs is refused, not expanded' '
	test_expect_code 1 "$KOP_TEST_TOOL" yaml "$FIXTURES/billion.yaml" >out &&
	grep "excessive aliasing" out
'

test_expect_success 'deep nesting is an error, not a crash' '
	awk "BEGIN { for (i = 0; i < 5000; i++) printf \"[\"; print \"\" }" >deep.yaml &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml deep.yaml >out &&
	grep "nested deeper than 1000 levels" out
'

test_expect_success 'JSON input is read as JSON, several values in a row' '
	printf "{\"a\": 1e2, \"b\": \"yes\"}\n[1,\n 2]\nnull\n" >in.json &&
	"$KOP_TEST_TOOL" yaml in.json >out &&
	printf "{\"a\":100,\"b\":\"yes\"}\n[1,2]\n" >expect &&
	test_cmp expect out
'

test_expect_success 'flow YAML that is not JSON still reads as YAML' '
	printf "{a: yes, b: [x, 2]}\n" >flow.yaml &&
	"$KOP_TEST_TOOL" yaml flow.yaml >out &&
	echo "{\"a\":true,\"b\":[\"x\",2]}" >expect &&
	test_cmp expect out
'

test_expect_success 'truncated JSON is an error naming the file, not fewer documents' '
	printf "{\"kind\": \"A\"}\n{\"kind\": \"B\"" >cut.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml cut.json >out &&
	grep "^error: .*cut.json" out &&
	printf "[1, 2" >cut2.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml cut2.json >out &&
	grep "^error: .*cut2.json" out
'

# Its value is never shown (it may be a Secret's): its place is, line, column and field path.
test_expect_success 'an integer beyond 2^53 in JSON input is an error naming the file, line, column and path, as in YAML' '
	printf "{\"a\": 9007199254740992,\n \"s\": \"9007199254740993\", \"b\": [1, -9007199254740993]}\n" >big.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml big.json >out &&
	echo "error: unable to parse .big\.json.: line 2, column 36: b\[1\]: an integer beyond 2^53 would be held rounded (numbers are doubles here); quote it if it is text" >expect &&
	grep -x -f expect out &&
	printf "a: 9007199254740992\ns: \"9007199254740993\"\nb: [1, -9007199254740993]\n" >big.yaml &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml big.yaml >out &&
	echo "error: unable to parse .big\.yaml.: line 3, column 8: b\[1\]: an integer beyond 2^53 would be held rounded (numbers are doubles here); quote it if it is text" >expect.yaml &&
	grep -x -f expect.yaml out &&
	printf "{\"k\": [{\"a.b\": {\"c\": [0, {\"x y\": 9007199254740993}]}}]}\n" >deep.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml deep.json >out &&
	grep "line 1, column 34: k\[0\]\[a.b\].c\[1\]\[x y\]: an integer beyond 2^53" out &&
	! grep -F 9007199254740993 out &&
	printf "{\"a\": 9007199254740992, \"f\": 9007199254740993.5}\n" >ok.json &&
	"$KOP_TEST_TOOL" yaml ok.json >out
'

# Past 64 bits go-yaml reads digits as a float (rounded, and kubectl sends it so), as it reads a
# leading 0 that is not octal: refused as any integer past 2^53 is, the JSON input too.
test_expect_success 'an integer past 64 bits, plain or tagged, is refused naming its place, not read as a rounded float' '
	for v in 92233720368547758071 -18446744073709551616 +18446744073709551615 1_0000_0000_0000_0000_0000 \
		09007199254740993 0999999999999999999 "!!int 92233720368547758071" "!!float 92233720368547758071"; do
		printf "spec:\n  replicas: %s\n" "$v" >wide.yaml &&
		test_expect_code 1 "$KOP_TEST_TOOL" yaml wide.yaml >out &&
		echo "error: unable to parse .wide\.yaml.: line 2, column 13: spec.replicas: an integer beyond 2^53 would be held rounded (numbers are doubles here); quote it if it is text" >expect &&
		grep -x -f expect out &&
		! grep -e 758071 -e 551616 -e 551615 -e _0000 -e 740993 -e 999999 out || return 1
	done &&
	printf "{\"spec\": {\"replicas\": 92233720368547758071}}\n" >wide.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" yaml wide.json >out &&
	grep "line 1, column 23: spec.replicas: an integer beyond 2^53" out &&
	printf "a: 0999\nb: 017777777777777777\nc: \"92233720368547758071\"\nd: 1e20\ne: 0x1FFFFFFFFFFFFFFFF\n" >fine.yaml &&
	"$KOP_TEST_TOOL" yaml fine.yaml >out &&
	echo "{\"a\":999,\"b\":562949953421311,\"c\":\"92233720368547758071\",\"d\":1e+20,\"e\":\"0x1FFFFFFFFFFFFFFFF\"}" >expect &&
	test_cmp expect out
'

test_expect_success 'a missing file is an error naming it' '
	test_expect_code 1 "$KOP_TEST_TOOL" yaml nope.yaml >out &&
	echo "error: unable to open '\''nope.yaml'\'': No such file or directory" >expect &&
	test_cmp expect out
'

test_done
