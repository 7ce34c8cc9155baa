#!/bin/sh
test_description='kapply against ksim: create, update, no-op, drift, conflicts, deletion, CRDs, errors, order'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_start

# get KIND NAME [NS]: the live object as JSON in "$2.json"
get () {
	timeout 30 kubectl get "$1" "$2" -n "${3:-ns}" -o json --show-managed-fields >"$2.json"
}

cm_yaml () {
	printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: ns\ndata:\n  k: %s\n' "$1" "$2"
}

# result_for NAME FILTER: exactly one result line in out is for NAME, and FILTER holds for it
result_for () {
	jq -e -s --arg n "$1" "map(select(.ref.name == \$n)) | length == 1 and (.[0] | $2)" "${3:-out}"
}

test_expect_success 'setup: ksim and a namespace applied by kapply' '
	printf "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n" >ns.yaml &&
	timeout 30 kapply -f ns.yaml >out 2>err &&
	jq -e ".ok == true and .code == 201 and .ref.kind == \"Namespace\"" out
'

test_expect_success 'create: 201, the new resourceVersion, owned by iot-operator (Apply)' '
	cm_yaml x one >x.yaml &&
	timeout 30 kapply -f x.yaml >out 2>err &&
	jq -e -s "length == 1 and .[0].op == \"result\" and .[0].for == \"apply\" and .[0].ok == true and .[0].code == 201" out &&
	get cm x &&
	test "$(jq -r .resourceVersion out)" = "$(jq -r .metadata.resourceVersion x.json)" &&
	jq -e ".data.k == \"one\" and (.metadata.managedFields | any(.manager == \"iot-operator\" and .operation == \"Apply\"))" x.json
'

test_expect_success 'no-op: the same apply again changes no resourceVersion' '
	rv=$(jq -r .metadata.resourceVersion x.json) &&
	timeout 30 kapply -f x.yaml >out 2>err &&
	jq -e ".ok == true and .code == 200 and .resourceVersion == \"$rv\"" out &&
	get cm x &&
	test "$(jq -r .metadata.resourceVersion x.json)" = "$rv"
'

test_expect_success 'update: a changed field is written' '
	rv=$(jq -r .metadata.resourceVersion x.json) &&
	cm_yaml x two >x.yaml &&
	timeout 30 kapply -f x.yaml >out 2>err &&
	get cm x &&
	jq -e ".data.k == \"two\"" x.json &&
	test "$(jq -r .resourceVersion out)" = "$(jq -r .metadata.resourceVersion x.json)" &&
	test "$(jq -r .resourceVersion out)" != "$rv"
'

test_expect_success 'drift: another manager changed a field we own; the forced re-apply wins' '
	timeout 30 kubectl patch cm x -n ns --type merge -p "{\"data\":{\"k\":\"drifted\"}}" >/dev/null &&
	get cm x && jq -e ".data.k == \"drifted\"" x.json &&
	timeout 30 kapply -f x.yaml >out 2>err &&
	jq -e ".ok == true" out &&
	get cm x &&
	jq -e ".data.k == \"two\"" x.json
'

test_expect_success 'conflict: without force it is reported with the other manager and the field, nothing written' '
	timeout 30 kubectl patch cm x -n ns --type merge -p "{\"data\":{\"k\":\"theirs\"}}" >/dev/null &&
	get cm x && rv=$(jq -r .metadata.resourceVersion x.json) &&
	test_expect_code 111 timeout 30 kapply --force-conflicts=false -f x.yaml >out 2>err &&
	jq -e ".ok == false and .code == 409 and .reason == \"Conflict\" and
		(.message | test(\"conflict with \\\"kubectl-patch\\\"\")) and (.message | test(\"\\\\.data\\\\.k\")) and
		(.causes | any(.reason == \"FieldManagerConflict\" and .field == \".data.k\"))" out &&
	grep "conflict with" err &&
	grep "force-conflicts" err &&
	get cm x &&
	jq -e ".data.k == \"theirs\"" x.json &&
	test "$(jq -r .metadata.resourceVersion x.json)" = "$rv"
'

test_expect_success 'deletion: a mismatched uid is a 409 and the object stays' '
	echo "{\"op\":\"delete\",\"primary\":\"ns/p\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\",\"namespace\":\"ns\",\"uid\":\"not-the-uid\"}}}" >in &&
	timeout 30 kapply <in >out 2>err &&
	jq -e ".for == \"delete\" and .ok == false and .code == 409 and .reason == \"Conflict\" and .primary == \"ns/p\"" out &&
	get cm x
'

test_expect_success 'deletion: with the right uid it is deleted; a second time, not found is success' '
	uid=$(jq -r .metadata.uid x.json) &&
	echo "{\"op\":\"delete\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\",\"namespace\":\"ns\",\"uid\":\"$uid\"}},\"propagationPolicy\":\"Background\"}" >in &&
	cat in in >in2 &&
	timeout 30 kapply <in2 >out 2>err &&
	jq -e -s "length == 2 and .[0].ok == true and .[0].code == 200 and .[1].ok == true and .[1].code == 404" out &&
	test_must_fail timeout 30 kubectl get cm x -n ns
'

test_expect_success 'a CRD and its objects in one file (a List too): the CRD is waited for' '
	timeout 60 kapply -f "$FIXTURES/crd.yaml" >out 2>err &&
	jq -e -s "length == 3 and all(.ok) and .[0].ref.kind == \"CustomResourceDefinition\"" out &&
	get widgets.test.example.org w1 && jq -e ".spec.color == \"red\" and .spec.size == 3" w1.json &&
	get widgets.test.example.org w2 && jq -e ".spec.size == 5" w2.json
'

test_expect_success 'permanent errors: 422 with causes, 404 namespace; each reported at once, exit 100' '
	cat >bad.yaml <<-\EOF &&
	apiVersion: test.example.org/v1
	kind: Widget
	metadata: {name: bad, namespace: ns}
	spec: {color: pink}
	---
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: lost, namespace: nowhere}
	---
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: fine, namespace: ns}
	---
	apiVersion: nothing.example.org/v1
	kind: Nothing
	metadata: {name: nope, namespace: ns}
	EOF
	test_expect_code 100 timeout 60 kapply -f bad.yaml >out 2>err &&
	jq -e -s "length == 4" out &&
	result_for bad ".ok == false and .code == 422 and .reason == \"Invalid\" and
		(.causes | any(.field == \"spec.color\"))" out &&
	result_for lost ".ok == false and .code == 404 and .reason == \"NotFound\" and
		(.message | test(\"nowhere\"))" out &&
	result_for nope ".ok == false and .code == 404" out &&
	result_for fine ".ok == true" out &&
	! grep -q retrying err
'

test_expect_success 'stream: a namespace and its objects in one stream, many in flight; other lines pass in order' '
	{
		echo "{\"op\":\"status\",\"primary\":\"ns2/a\",\"n\":0}" &&
		echo "{\"op\":\"apply\",\"primary\":\"ns2/a\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"ns2\"}}}" &&
		for i in $(seq 1 40); do
			echo "{\"op\":\"apply\",\"primary\":\"ns2/a\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c$i\",\"namespace\":\"ns2\"},\"data\":{\"i\":\"$i\"}}}" || return 1
		done &&
		echo "{\"op\":\"status\",\"primary\":\"ns2/a\",\"n\":1}" &&
		echo "not an object, passed through" | jq -R . &&
		echo "{\"op\":\"event\",\"n\":2}"
	} >in &&
	timeout 60 kapply --concurrency 8 <in >out 2>err &&
	jq -e -s "length == 45" out &&
	jq -e -s "[.[] | select(type == \"object\" and .op == \"result\")] | length == 41 and all(.ok)" out &&
	# the first status line goes first; the second one waits for the applies of its primary
	jq -e -s ".[0].n == 0 and .[42].n == 1 and .[43] == \"not an object, passed through\" and .[44].n == 2" out &&
	timeout 30 kubectl get cm -n ns2 -o json >list.json &&
	jq -e "[.items[] | select(.metadata.name | startswith(\"c\"))] | length == 40" list.json
'

test_expect_success 'stream: an unknown op is answered with a failed result naming it; the stream goes on' '
	{
		echo "{\"op\":\"frobnicate\",\"primary\":\"ns/f\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"frob\",\"namespace\":\"ns\"}}}" &&
		echo "{\"op\":\"apply\",\"primary\":\"ns/f\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"after-frob\",\"namespace\":\"ns\"}}}" &&
		echo "{\"op\":42,\"primary\":\"ns/f\"}" &&
		# what other stages act on or write, and lines without an op, pass unchanged
		echo "{\"op\":\"status\",\"primary\":\"ns/f\",\"n\":1}" &&
		echo "{\"op\":\"event\",\"primary\":\"ns/f\",\"n\":2}" &&
		echo "{\"op\":\"result\",\"for\":\"status\",\"primary\":\"ns/f\",\"ok\":true,\"n\":3}" &&
		echo "{\"op\":\"dry-run\",\"for\":\"apply\",\"n\":4}" &&
		echo "{\"op\":\"diff\",\"for\":\"apply\",\"n\":5}" &&
		echo "{\"type\":\"ADDED\",\"n\":6}" &&
		echo "{\"op\":null,\"n\":7}"
	} >in &&
	timeout 60 kapply <in >out 2>err &&
	jq -e -s "length == 10" out &&
	result_for frob ".op == \"result\" and .for == \"frobnicate\" and .primary == \"ns/f\" and .ok == false and
		.code == 400 and .reason == \"BadRequest\" and (.message | startswith(\"unknown op '"'"'frobnicate'"'"'\"))" out &&
	result_for after-frob ".for == \"apply\" and .ok == true and .code == 201" out &&
	jq -e -s "[.[] | select(.for == \"42\")] | length == 1 and (.[0] | .op == \"result\" and .ok == false and
		.code == 400 and (.message | startswith(\"unknown op '"'"'42'"'"'\")))" out &&
	jq -e -s "[.[] | select(.n)] == [
		{\"op\":\"status\",\"primary\":\"ns/f\",\"n\":1}, {\"op\":\"event\",\"primary\":\"ns/f\",\"n\":2},
		{\"op\":\"result\",\"for\":\"status\",\"primary\":\"ns/f\",\"ok\":true,\"n\":3},
		{\"op\":\"dry-run\",\"for\":\"apply\",\"n\":4}, {\"op\":\"diff\",\"for\":\"apply\",\"n\":5},
		{\"type\":\"ADDED\",\"n\":6}, {\"op\":null,\"n\":7}]" out &&
	grep -q "unable to perform line 1 of stdin: unknown op .frobnicate." err &&
	grep -q "unable to perform line 3 of stdin: unknown op .42." err &&
	get cm after-frob && ! kubectl get cm frob -n ns >/dev/null 2>&1
'

# (read for its "op" and "primary" alone: its spacing, and a number no double
# holds, come out as they went in, after the apply of its primary before it)
test_expect_success 'stream: a line passed through goes on as its text, after its primary'"'"'s operations' '
	line="{\"op\": \"status\", \"primary\": \"ns/t\", \"n\": 9007199254740993}" &&
	{
		echo "{\"op\":\"apply\",\"primary\":\"ns/t\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"text-1\",\"namespace\":\"ns\"}}}" &&
		echo "$line"
	} >in &&
	timeout 60 kapply <in >out 2>err &&
	test "$(wc -l <out)" -eq 2 &&
	sed -n 1p out | jq -e ".op == \"result\" and .for == \"apply\" and .ok == true" &&
	sed -n 2p out >actual &&
	echo "$line" >expect &&
	test_cmp expect actual
'

test_expect_success 'stream: more applies than the queue holds, in one read: each applied once and in order, the line behind them last' '
	{
		echo "{\"op\":\"apply\",\"primary\":\"ns3/a\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"ns3\"}}}" &&
		for v in 1 2; do
			for i in $(seq 1 350); do
				echo "{\"op\":\"apply\",\"primary\":\"ns3/a\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"q$i\",\"namespace\":\"ns3\"},\"data\":{\"v\":\"$v\"}}}" || return 1
			done || return 1
		done &&
		echo "{\"op\":\"status\",\"primary\":\"ns3/a\",\"n\":1}"
	} >in &&
	timeout 120 kapply --concurrency 1 --log-level debug <in >out 2>err &&
	grep -q "waits unread: 260 operations are held" err &&
	jq -e -s "length == 702 and (.[:701] | all(.op == \"result\" and .ok)) and .[701].n == 1" out &&
	jq -r ".object.metadata.name // empty" in >names &&
	jq -r "select(.op == \"result\") | .ref.name" out >done &&
	test_cmp names done &&
	timeout 30 kubectl get cm -n ns3 -o json >list.json &&
	jq -e "[.items[] | select(.metadata.name | startswith(\"q\"))] | length == 350 and all(.data.v == \"2\")" list.json
'

test_expect_success 'stream: operations on one object keep their order' '
	for i in 1 2 3 4 5 6; do
		echo "{\"op\":\"apply\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ordered\",\"namespace\":\"ns\"},\"data\":{\"v\":\"$i\"}}}" || return 1
	done >in &&
	timeout 60 kapply --concurrency 8 <in >out 2>err &&
	jq -s -r ".[].resourceVersion" out >rvs &&
	sort -n rvs >sorted && test_cmp sorted rvs &&
	get cm ordered && jq -e ".data.v == \"6\"" ordered.json
'

test_expect_success 'a patch operation (merge) with a finalizer' '
	echo "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ordered\",\"namespace\":\"ns\"}},\"patchType\":\"merge\",\"patch\":{\"metadata\":{\"finalizers\":[\"example.org/f\"]}}}" >in &&
	echo "{\"op\":\"patch\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ordered\",\"namespace\":\"ns\"}},\"patchType\":\"json\",\"patch\":[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]}" >>in &&
	timeout 30 kapply <in >out 2>err &&
	jq -e -s "length == 2 and all(.ok and .for == \"patch\")" out &&
	get cm ordered && jq -e ".metadata.finalizers == null" ordered.json
'

# A create (POST) never writes over an object of the same name: ireconcile's
# children of adopt: false (docs/writing-programs.md).
test_expect_success 'a create operation: 201 once, then 409 AlreadyExists and the object left as it was' '
	echo "{\"op\":\"create\",\"primary\":\"p/q\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"made\",\"namespace\":\"ns\"},\"data\":{\"k\":\"first\"}}}" >in &&
	timeout 30 kapply <in >out 2>err &&
	jq -e -s "length == 1 and .[0].for == \"create\" and .[0].ok == true and .[0].code == 201 and .[0].primary == \"p/q\"" out &&
	get cm made &&
	jq -e ".data.k == \"first\" and (.metadata.managedFields | any(.manager == \"iot-operator\" and .operation == \"Update\"))" made.json &&
	sed "s/first/second/" in >in2 &&
	timeout 30 kapply <in2 >out 2>err &&
	jq -e -s "length == 1 and .[0].for == \"create\" and .[0].ok == false and .[0].code == 409 and .[0].reason == \"AlreadyExists\"
		and (.[0].transient | not)" out &&
	grep "unable to create .ConfigMap/ns/made.: configmaps \\\\\"made\\\\\" already exists" err &&
	get cm made &&
	jq -e ".data.k == \"first\"" made.json
'

# Writes are traced to the replica that made them by the user agent
# (docs/iot-operator.md, POD_NAME); the field manager an API server derives
# from it (the part before "/", when a request names none) stays the same.
test_expect_success 'the user agent names the replica (POD_NAME), or none when POD_NAME is not a name' '
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >reset.json &&
	POD_NAME=op-7 timeout 30 kapply -f x.yaml >out 2>err &&
	jq -e ".ok == true" out &&
	POD_NAME="op 8" timeout 30 kapply -f x.yaml >out 2>err &&
	jq -e ".ok == true" out &&
	grep "POD_NAME .op 8. is not a DNS-1123 subdomain: left out of the user agent" err &&
	curl -sS -f -m 10 "$KSIM_URL/ksim/stats" >stats.json &&
	jq -c "[.byAgent | keys[] | select(startswith(\"iot-operator/\"))]" stats.json >actual &&
	echo "[\"iot-operator/kapply\",\"iot-operator/kapply (op-7)\"]" >expect &&
	test_cmp expect actual &&
	ksim_curl -f -A "iot-operator/kapply (op-7)" -o patched.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"data\":{\"ua\":\"op-7\"}}" /api/v1/namespaces/ns/configmaps/x &&
	get cm x &&
	jq -e ".metadata.managedFields | any(.manager == \"iot-operator\" and .operation == \"Update\"
		and (.fieldsV1[\"f:data\"] | has(\"f:ua\")))" x.json
'

test_expect_success 'a result gives back the tag of its operation, failed or not; none when it had none' '
	{
		echo "{\"op\":\"apply\",\"primary\":\"ns/t\",\"tag\":\"t-1\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"tagged\",\"namespace\":\"ns\"}}}" &&
		echo "{\"op\":\"delete\",\"primary\":\"ns/t\",\"tag\":\"t-2\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"tagged\",\"namespace\":\"ns\",\"uid\":\"not-the-uid\"}}}" &&
		echo "{\"op\":\"apply\",\"primary\":\"ns/t\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"untagged\",\"namespace\":\"ns\"}}}"
	} >in &&
	timeout 30 kapply <in >out 2>err || test $? = 100 &&
	# (results come as their requests end: in any order but per object)
	jq -c -s "sort_by(.tag // \"\") | .[] | [.for, .ok, .tag]" out >got &&
	printf "%s\n" "[\"apply\",true,null]" "[\"apply\",true,\"t-1\"]" "[\"delete\",false,\"t-2\"]" >expect &&
	test_cmp expect got
'

test_expect_success 'cleanup' '
	ksim_stop
'

test_done
