#!/bin/sh
test_description='kapply --dry-run (client and server) and --diff'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

test_expect_success 'kapply --help; bad usage exits 100' '
	kapply --help >help &&
	grep "^usage: kapply" help &&
	test_expect_code 100 kapply --bogus 2>err &&
	test_expect_code 100 kapply --dry-run=maybe 2>err &&
	grep "invalid --dry-run" err &&
	test_expect_code 100 kapply --concurrency 0 2>err &&
	test_expect_code 100 kapply --diff --dry-run 2>err &&
	test_expect_code 100 kapply --kubeconfig /nonexistent -f "$FIXTURES/manifest.yaml" >out 2>err &&
	test ! -s out
'

test_expect_success '--dry-run=client needs no server: what would be sent, per operation (golden)' '
	timeout 30 kapply --dry-run --kubeconfig /nonexistent -f "$FIXTURES/manifest.yaml" >out 2>err &&
	test_cmp_json "$FIXTURES/dry-run-manifest.expect" out
'

test_expect_success '--dry-run=client on a stream: other lines pass, a bad operation is reported (golden)' '
	timeout 30 kapply --dry-run=client --kubeconfig /nonexistent -n ns <"$FIXTURES/stream.jsonl" >out 2>err &&
	test_cmp_json "$FIXTURES/dry-run-stream.expect" out
'

test_expect_success 'a line that is not JSON: logged as such with its line number, skipped, the rest goes on' '
	printf "{oops\n{\"x\":1}\n" | timeout 30 kapply --dry-run=client --kubeconfig /nonexistent >out 2>err &&
	echo "{\"x\":1}" >expect && test_cmp expect out &&
	jq -r "select(.level == \"error\") | .msg" err >msgs &&
	grep "^stdin: a bad line skipped: line 1, column" msgs
'

# jv numbers are doubles: an integer past 2^53 is refused, not sent rounded.
# (The key n is false in YAML 1.1, as kubectl reads it: the path says so.)
test_expect_success 'an integer beyond 2^53: not sent (a stream line fails, apply or create, a manifest is refused); 2^53 is' '
	printf "%s\n" "{\"op\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"big\",\"namespace\":\"a\"},\"data\":{\"s\":\"9007199254740993\"},\"n\":9007199254740993}}" \
		"{\"op\":\"create\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"bigc\",\"namespace\":\"a\"},\"n\":9007199254740993}}" \
		"{\"op\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"top\",\"namespace\":\"a\"},\"n\":-9007199254740992}}" |
		timeout 30 kapply --dry-run=client --kubeconfig /nonexistent >out 2>err &&
	jq -r "[.op, .ref.name, .ok, .message] | @tsv" out >actual &&
	printf "result\tbig\tfalse\tline 1, column 140: object.n: an integer beyond 2^53 would be sent rounded (numbers are doubles here), so it is not sent\nresult\tbigc\tfalse\tline 2, column 110: object.n: an integer beyond 2^53 would be sent rounded (numbers are doubles here), so it is not sent\ndry-run\ttop\t\t\n" >expect &&
	test_cmp expect actual &&
	! grep -F 9007199254740993 out err &&
	jq -e "select(.op == \"dry-run\") | .request.body.n == -9007199254740992" out &&
	printf "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: a}\nbinaryData: {}\nn: 0x20000000000001\n" >big.yaml &&
	test_expect_code 100 timeout 30 kapply --dry-run --kubeconfig /nonexistent -f big.yaml >out 2>err &&
	grep "line 5, column 4: false: an integer beyond 2^53 would" err &&
	! grep -F 0x20000000000001 err &&
	printf "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: big, namespace: a}\nspec:\n  replicas: 92233720368547758071\n" >wide.yaml &&
	test_expect_code 100 timeout 30 kapply --dry-run --kubeconfig /nonexistent -f wide.yaml >out 2>err &&
	test ! -s out &&
	grep "line 5, column 13: spec.replicas: an integer beyond 2^53 would" err &&
	! grep -F 758071 err
'

test_expect_success 'an integer beyond 2^53 in a JSON manifest (file, directory, stdin): refused naming the file and the place' '
	mkdir big &&
	printf "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"big\",\"namespace\":\"a\"},\n \"extra\":9007199254740993}\n" >big/big.json &&
	test_expect_code 100 timeout 30 kapply -f big/big.json --dry-run --kubeconfig /nonexistent >out 2>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	grep -x "unable to parse .big/big\.json.: line 2, column 10: extra: an integer beyond 2^53 would .*" msgs &&
	test_expect_code 100 timeout 30 kapply -f big --dry-run --kubeconfig /nonexistent >out 2>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	grep -x "unable to parse .big/big\.json.: line 2, column 10: extra: an integer beyond 2^53 would .*" msgs &&
	test_expect_code 100 timeout 30 kapply -f - --dry-run --kubeconfig /nonexistent <big/big.json >out 2>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	grep -x "unable to parse .<stdin>.: line 2, column 10: extra: an integer beyond 2^53 would .*" msgs &&
	sed s/9007199254740993/-9007199254740992/ big/big.json >top.json &&
	timeout 30 kapply -f top.json --dry-run --kubeconfig /nonexistent >out 2>err &&
	jq -e ".request.body.extra == -9007199254740992" out
'

test_expect_success 'a refused operation is named by what it has: its kind and name, else its line; a non-object by its type' '
	printf "%s\n" "{\"op\":\"apply\",\"object\":5}" "{\"op\":\"apply\"}" \
		"{\"op\":\"apply\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"n\"}}}" \
		"{\"op\":\"delete\",\"object\":[1]}" \
		"{\"op\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"a\"}}}" >in &&
	timeout 30 kapply --dry-run --kubeconfig /nonexistent -n b <in >out 2>err &&
	jq -r "[.ok, .code, .message] | @tsv" out >actual &&
	cat >expect <<-\EOF &&
	false	400	the object is a number, not an object
	false	400	the operation has no object
	false	400	the object has no apiVersion or metadata.name (an operation needs apiVersion, kind and metadata.name)
	false	400	the object is an array, not an object
	EOF
	sed -n 1,4p actual >actual4 &&
	test_cmp expect actual4 &&
	jq -r "select(.level == \"error\") | .msg" err >msgs &&
	cat >expect <<-\EOF &&
	unable to apply the object of line 1: the object is a number, not an object
	unable to apply the object of line 2: the operation has no object
	unable to apply "ConfigMap" (line 3): the object has no apiVersion or metadata.name (an operation needs apiVersion, kind and metadata.name)
	unable to delete the object of line 4: the object is an array, not an object
	unable to apply "ConfigMap/a/c" (line 5): the namespace from the provided object "a" does not match the namespace "b"
	EOF
	# single quotes cannot appear in a test body: compare them as double quotes
	tr "\047" "\042" <msgs >actual &&
	test_cmp expect actual
'

ksim_start

test_expect_success 'setup: ksim with a namespace and a ConfigMap' '
	printf "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n" >ns.yaml &&
	timeout 30 kapply -f ns.yaml >out 2>err &&
	cat >cm.yaml <<-\EOF &&
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: settings, namespace: ns, labels: {a: b}}
	data: {mode: slow, level: "3", extra: "gone soon"}
	EOF
	timeout 30 kapply -f cm.yaml >out 2>err
'

test_expect_success 'kstatus: a line that is not JSON is logged as such, skipped' '
	printf "{oops\n{\"x\":1}\n" | timeout 30 kstatus >out 2>err &&
	echo "{\"x\":1}" >expect && test_cmp expect out &&
	jq -r "select(.level == \"error\") | .msg" err | grep "^stdin: a bad line skipped: line 1, column"
'

test_expect_success '--dry-run=server: sent with dryRun=All, nothing persisted' '
	timeout 30 kubectl get cm settings -n ns -o json >before.json &&
	timeout 30 kapply --dry-run=server -f "$FIXTURES/manifest.yaml" -n ns >out 2>err &&
	jq -e -s "length == 3 and all(.ok and .dryRun == \"server\")" out &&
	timeout 30 kubectl get cm settings -n ns -o json >after.json &&
	test_cmp before.json after.json &&
	test_must_fail timeout 30 kubectl get deploy web -n ns &&
	test_must_fail timeout 30 kubectl get svc web -n ns
'

test_expect_success '--diff: what would change against the live objects, exit 1 (golden)' '
	test_expect_code 1 timeout 30 kapply --diff -f "$FIXTURES/diff.yaml" -n ns >out 2>err &&
	# in flight together, so in any order
	jq -s -c "sort_by(.ref.name)[]" out >diff &&
	test_cmp_json "$FIXTURES/diff.expect" diff &&
	test_must_fail timeout 30 kubectl get cm fresh -n ns &&
	timeout 30 kubectl get cm settings -n ns -o json >live.json &&
	jq -e ".data.mode == \"slow\"" live.json
'

test_expect_success '--diff: nothing to change, no output, exit 0' '
	timeout 30 kapply --diff -f cm.yaml >out 2>err &&
	test ! -s out
'

test_expect_success '--diff of a patch: the change it would make, nothing written' '
	echo "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"settings\",\"namespace\":\"ns\"}},\"patchType\":\"merge\",\"patch\":{\"data\":{\"level\":\"4\"}}}" >in &&
	test_expect_code 1 timeout 30 kapply --diff <in >out 2>err &&
	jq -e ".op == \"diff\" and .for == \"patch\" and .changes == [{\"path\":\".data.level\",\"from\":\"3\",\"to\":\"4\"}]" out &&
	timeout 30 kubectl get cm settings -n ns -o json >live.json &&
	jq -e ".data.level == \"3\"" live.json
'

test_expect_success '--diff of a deletion: the object would go (right uid) or stay (wrong uid)' '
	timeout 30 kubectl get cm settings -n ns -o json >live.json &&
	uid=$(jq -r .metadata.uid live.json) &&
	echo "{\"op\":\"delete\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"settings\",\"namespace\":\"ns\",\"uid\":\"$uid\"}}}" >in &&
	echo "{\"op\":\"delete\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"settings\",\"namespace\":\"ns\",\"uid\":\"other\"}}}" >>in &&
	test_expect_code 1 timeout 30 kapply --diff <in >out 2>err &&
	jq -e -s "length == 1 and .[0].op == \"diff\" and .[0].for == \"delete\" and .[0].changes[0].path == \".\" and
		.[0].changes[0].from.data.mode == \"slow\" and (.[0].changes[0] | has(\"to\") | not)" out &&
	timeout 30 kubectl get cm settings -n ns
'

test_expect_success 'cleanup' '
	ksim_stop
'

test_done
