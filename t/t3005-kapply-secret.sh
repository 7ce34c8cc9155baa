#!/bin/sh
test_description='kapply never prints a Secret value: --diff and --dry-run mask data and stringData as kubectl diff does'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

# base64 of OldPassw0rd and NewPassw0rd, and a stringData value
OLD=T2xkUGFzc3cwcmQ=
NEW=TmV3UGFzc3cwcmQ=
PLAIN=s3cr3t-t0ken

# secret_yaml NAME PASSWORD [LABEL]: a Secret in ns
secret_yaml () {
	printf "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: ns\n  labels: {tier: %s}\ntype: Opaque\ndata:\n  password: %s\n  user: YWRtaW4=\n" \
		"$1" "${3:-db}" "$2"
}

# no_secret FILE...: none of the values above appears in the files
no_secret () {
	for f in "$@"
	do
		if grep -F -e "$OLD" -e "$NEW" -e "$PLAIN" -e YWRtaW4= "$f"
		then
			echo "a Secret value in $f"
			return 1
		fi
	done
}

ksim_start

test_expect_success 'setup: a namespace and a Secret' '
	printf "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n" >ns.yaml &&
	timeout 30 kapply -f ns.yaml >out 2>err &&
	secret_yaml db "$OLD" >db.yaml &&
	timeout 30 kapply -f db.yaml >out 2>err &&
	jq -e ".ok and .code == 201" out
'

test_expect_success '--diff: a changed value is "*** (before)" and "*** (after)", one that stays is not shown' '
	secret_yaml db "$NEW" >db2.yaml &&
	test_expect_code 1 timeout 30 kapply --diff --log-level trace -f db2.yaml >out 2>err &&
	echo "[{\"path\":\".data.password\",\"from\":\"*** (before)\",\"to\":\"*** (after)\"}]" >expect &&
	jq -c .changes out >actual &&
	test_cmp expect actual &&
	no_secret out err &&
	# values that stay are not shown at all
	secret_yaml db "$OLD" web >db3.yaml &&
	test_expect_code 1 timeout 30 kapply --diff -f db3.yaml >out 2>err &&
	echo "[{\"path\":\".metadata.labels.tier\",\"from\":\"db\",\"to\":\"web\"}]" >expect &&
	jq -c .changes out >actual &&
	test_cmp expect actual &&
	no_secret out err
'

test_expect_success '--diff of a new Secret: the object appears with "***" for every value' '
	secret_yaml fresh "$NEW" >fresh.yaml &&
	printf "stringData:\n  token: %s\n" "$PLAIN" >>fresh.yaml &&
	test_expect_code 1 timeout 30 kapply --diff -f fresh.yaml >out 2>err &&
	jq -e ".changes[0].path == \".\" and .changes[0].to.data.password == \"***\" and .changes[0].to.data.user == \"***\"" out &&
	no_secret out err &&
	test_must_fail timeout 30 kubectl get secret fresh -n ns
'

test_expect_success '--diff of a merge patch and of a deletion of a Secret: masked' '
	timeout 30 kubectl get secret db -n ns -o json >live.json &&
	uid=$(jq -r .metadata.uid live.json) &&
	echo "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"db\",\"namespace\":\"ns\"}},\"patchType\":\"merge\",\"patch\":{\"data\":{\"password\":\"$NEW\"}}}" >in &&
	echo "{\"op\":\"delete\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"db\",\"namespace\":\"ns\",\"uid\":\"$uid\"}}}" >>in &&
	test_expect_code 1 timeout 30 kapply --diff <in >out 2>err &&
	jq -e -s "length == 2 and
		(.[0].for == \"patch\" and .[0].changes == [{\"path\":\".data.password\",\"from\":\"*** (before)\",\"to\":\"*** (after)\"}]) and
		(.[1].for == \"delete\" and .[1].changes[0].from.data == {\"password\":\"***\",\"user\":\"***\"})" out &&
	no_secret out err &&
	timeout 30 kubectl get secret db -n ns -o json >live.json &&
	jq -e ".data.password == \"$OLD\"" live.json
'

test_expect_success '--dry-run=client: the request bodies of a Secret are masked (apply, merge and JSON patch)' '
	jq -n --arg new "$NEW" --arg plain "$PLAIN" "{apiVersion: \"v1\", kind: \"Secret\",
		metadata: {name: \"fresh\", namespace: \"ns\", labels: {tier: \"db\"},
			annotations: {\"kubectl.kubernetes.io/last-applied-configuration\": ({data: {password: \$new}} | tojson)}},
		data: {password: \$new, user: \"YWRtaW4=\"}, stringData: {token: \$plain}}" >dry.json &&
	timeout 30 kapply --dry-run -f dry.json >out 2>err &&
	jq -e ".request.body.data == {\"password\":\"***\",\"user\":\"***\"} and .request.body.stringData == {\"token\":\"***\"} and
		.request.body.metadata.annotations == {\"kubectl.kubernetes.io/last-applied-configuration\":\"***\"} and
		.request.body.metadata.labels == {\"tier\":\"db\"}" out &&
	no_secret out err &&
	echo "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"db\",\"namespace\":\"ns\"}},\"patchType\":\"merge\",\"patch\":{\"data\":{\"password\":\"$NEW\",\"user\":null}}}" >in &&
	echo "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"db\",\"namespace\":\"ns\"}},\"patchType\":\"json\",\"patch\":[{\"op\":\"replace\",\"path\":\"/data/password\",\"value\":\"$NEW\"},{\"op\":\"add\",\"path\":\"/stringData\",\"value\":{\"token\":\"$PLAIN\"}},{\"op\":\"add\",\"path\":\"/metadata/labels/tier\",\"value\":\"web\"},{\"op\":\"remove\",\"path\":\"/data/user\"}]}" >>in &&
	echo "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"}},\"patchType\":\"merge\",\"patch\":{\"data\":{\"k\":\"shown\"}}}" >>in &&
	timeout 30 kapply --dry-run <in >out 2>err &&
	jq -c -s "map(.request.body)" out >actual &&
	cat >expect <<-\EOF &&
	[{"data":{"password":"***","user":null}},[{"op":"replace","path":"/data/password","value":"***"},{"op":"add","path":"/stringData","value":{"token":"***"}},{"op":"add","path":"/metadata/labels/tier","value":"web"},{"op":"remove","path":"/data/user"}],{"data":{"k":"shown"}}]
	EOF
	test_cmp expect actual &&
	no_secret out err
'

# Of any kind: the place (line, column, field path) is named, never the value.
test_expect_success 'an integer beyond 2^53 on a line, in a Secret or not, applied or patched: refused naming its place, not its value' '
	echo "{\"op\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"pin\",\"namespace\":\"ns\"},\"stringData\":{\"pin\":92233720368547758071}}}" >in &&
	echo "{\"op\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"},\"data\":{\"a.b\":\"x\"},\"spec\":{\"x\":[1,-92233720368547758071]}}}" >>in &&
	printf "%s\n" "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\"}},\"patchType\":\"json\",\"patch\":[{\"op\":\"add\",\"path\":\"/data/x\",\"value\":9007199254740993}]}" >>in &&
	timeout 30 kapply --dry-run <in >out 2>err &&
	jq -r "[.op, .ref.name, .ok, .code, .message] | @tsv" out >actual &&
	cat >expect <<-\EOF &&
	result	pin	false	400	line 1, column 122: object.stringData.pin: an integer beyond 2^53 would be sent rounded (numbers are doubles here), so it is not sent
	result	c	false	400	line 2, column 137: object.spec.x[1]: an integer beyond 2^53 would be sent rounded (numbers are doubles here), so it is not sent
	result	c	false	400	line 3, column 169: patch[0].value: an integer beyond 2^53 would be sent rounded (numbers are doubles here), so it is not sent
	EOF
	test_cmp expect actual &&
	test $(grep -c "an integer beyond 2^53 would be sent rounded" err) = 3 &&
	! grep -e 58071 -e 40993 out err
'

# A manifest is refused before any object is read: the message names the
# place (line, column, field path), never the value.
test_expect_success 'an integer beyond 2^53 in a Secret manifest, JSON or YAML: its place named, not its value' '
	printf "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"pin\",\"namespace\":\"ns\"},\n \"stringData\":{\"a\":\"x\",\"pin\":9007199254740993}}\n" >pin.json &&
	printf "apiVersion: v1\nkind: Secret\nmetadata: {name: pin, namespace: ns}\ndata:\n  tls.crt: 9007199254740993\n" >pin.yaml &&
	test_expect_code 100 timeout 30 kapply --dry-run -f pin.json >out 2>err &&
	test_expect_code 100 timeout 30 kapply --dry-run -f - <pin.yaml >>out 2>>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	cat >expect <<-\EOF &&
	unable to parse pin.json: line 2, column 30: stringData.pin: an integer beyond 2^53 would be held rounded (numbers are doubles here); quote it if it is text
	unable to parse <stdin>: line 5, column 12: data[tls.crt]: an integer beyond 2^53 would be held rounded (numbers are doubles here); quote it if it is text
	EOF
	tr -d "\047" <msgs >msgs.noquote &&
	test_cmp expect msgs.noquote &&
	! grep -F 9007199254740993 out err
'

test_expect_success 'cleanup' '
	ksim_stop
'

test_done
