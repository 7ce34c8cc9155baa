#!/bin/sh
test_description='kstatus against ksim: status writes, no-op skips, deleted objects, passthrough'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_start

# status_line NAME UID STATUS-JSON [PRIMARY]
status_line () {
	printf '{"op":"status","primary":"%s","object":{"apiVersion":"test.example.org/v1","kind":"Widget","metadata":{"name":"%s","namespace":"ns","uid":"%s"},"status":%s}}\n' \
		"${4:-ns/$1}" "$1" "$2" "$3"
}

get_w () {
	timeout 30 kubectl get widgets.test.example.org "$1" -n ns -o json >"$1.json"
}

test_expect_success 'setup: ksim, a CRD with a status subresource, a Widget' '
	timeout 60 kapply -f "$TEST_DIRECTORY/t3001-kapply-ksim/crd.yaml" -f "$FIXTURES/ns.yaml" >out 2>err ||
	timeout 60 kapply -f "$FIXTURES/ns.yaml" -f "$TEST_DIRECTORY/t3001-kapply-ksim/crd.yaml" >out 2>err &&
	get_w w1 &&
	jq -e ".metadata.generation == 1" w1.json
'

test_expect_success 'write: the status is patched, observedGeneration as given, the spec untouched' '
	uid=$(jq -r .metadata.uid w1.json) &&
	status_line w1 "$uid" "{\"phase\":\"Processing\",\"observedGeneration\":1,\"conditions\":[{\"type\":\"Available\",\"status\":\"False\"}]}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Processing\",\"observedGeneration\":1,\"conditions\":[{\"type\":\"Available\",\"status\":\"False\"}]} and
		.spec.color == \"red\"" w1.json &&
	jq -e ".op == \"result\" and .for == \"status\" and .ok == true and .primary == \"ns/w1\" and
		.resourceVersion == \"$(jq -r .metadata.resourceVersion w1.json)\"" out
'

test_expect_success 'no-op: the same status again writes nothing (no resourceVersion change)' '
	rv=$(jq -r .metadata.resourceVersion w1.json) &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == true and .unchanged == true and .resourceVersion == \"$rv\"" out &&
	get_w w1 &&
	test "$(jq -r .metadata.resourceVersion w1.json)" = "$rv"
'

test_expect_success 'a smaller status replaces the stored one (removed keys go)' '
	uid=$(jq -r .metadata.uid w1.json) &&
	status_line w1 "$uid" "{\"phase\":\"Available\",\"observedGeneration\":1}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Available\",\"observedGeneration\":1}" w1.json
'

test_expect_success 'a deleted object is skipped quietly, with a result line' '
	status_line gone "some-uid" "{\"phase\":\"Available\"}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == true and .skipped == \"deleted\" and .code == 404" out &&
	! grep "\"level\":\"error\"" err
'

test_expect_success 'an object deleted and created again (another uid) is skipped too' '
	status_line w1 "the-old-uid" "{\"phase\":\"Failed\"}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == true and .skipped == \"deleted\"" out &&
	get_w w1 &&
	jq -e ".status.phase == \"Available\"" w1.json
'

# (results come as writes finish: the two statuses' in either order; a line
# naming no primary passes once everything before it is done)
test_expect_success 'other lines pass through after what comes before them; a bad status line is reported and skipped' '
	uid=$(jq -r .metadata.uid w1.json) &&
	{
		echo "{\"type\":\"ADDED\",\"object\":{}}" &&
		status_line w1 "$uid" "{\"phase\":\"Processing\"}" &&
		echo "{\"op\":\"status\",\"object\":{\"kind\":\"Widget\"}}" &&
		echo "{\"op\":\"result\",\"for\":\"apply\",\"ok\":true}"
	} >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -c -s "map(.op // .type)" out >actual &&
	echo "[\"ADDED\",\"result\",\"result\",\"result\"]" >expect &&
	test_cmp expect actual &&
	jq -e -s "(.[1:3] | map(select(.ok == true and .primary == \"ns/w1\")) | length) == 1 and
		(.[1:3] | map(select(.ok == false and .code == 400)) | length) == 1 and .[3].for == \"apply\"" out
'

# known_line NAME UID STATUS-JSON STORED-JSON RV: a status line with what ireconcile saw stored
known_line () {
	printf '{"op":"status","primary":"ns/%s","stored":%s,"resourceVersion":"%s","object":{"apiVersion":"test.example.org/v1","kind":"Widget","metadata":{"name":"%s","namespace":"ns","uid":"%s"},"status":%s}}\n' \
		"$1" "$4" "$5" "$1" "$2" "$3"
}
# the GETs kstatus sent since the last reset of ksim's counters: a fresh
# kstatus reads its kind's API group once (discovery), then the objects it reads
kstatus_gets () {
	curl -sS -f -m 10 "$KSIM_URL/ksim/stats" | jq ".byAgent[\"iot-operator/kstatus\"].GET // 0"
}

test_expect_success 'a line carrying the stored status and its resourceVersion is written without a read' '
	get_w w1 &&
	uid=$(jq -r .metadata.uid w1.json) rv=$(jq -r .metadata.resourceVersion w1.json) &&
	known_line w1 "$uid" "{\"phase\":\"Processing\",\"observedGeneration\":1}" "$(jq -c .status w1.json)" "$rv" >in &&
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >/dev/null &&
	timeout 30 kstatus <in >out 2>err &&
	test "$(kstatus_gets)" = 1 &&
	jq -e ".ok == true and .code == 200" out &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Processing\",\"observedGeneration\":1}" w1.json
'

test_expect_success 'a stale resourceVersion (the object changed since) is read again: the status written is right' '
	get_w w1 &&
	uid=$(jq -r .metadata.uid w1.json) &&
	known_line w1 "$uid" "{\"phase\":\"Failed\"}" "{\"phase\":\"Available\",\"extra\":1}" 1 >in &&
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >/dev/null &&
	timeout 30 kstatus <in >out 2>err &&
	test "$(kstatus_gets)" -ge 2 &&
	jq -e ".ok == true" out &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Failed\"}" w1.json
'

test_expect_success 'a status after one written here, without what is stored, is written without a read' '
	get_w w1 &&
	uid=$(jq -r .metadata.uid w1.json) &&
	{
		status_line w1 "$uid" "{\"phase\":\"Processing\",\"message\":\"one\"}" &&
		status_line w1 "$uid" "{\"phase\":\"Processing\",\"message\":\"two\"}" &&
		status_line w1 "$uid" "{\"phase\":\"Available\"}"
	} >in &&
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >/dev/null &&
	timeout 30 kstatus --coalesce 0 <in >out 2>err &&
	: discovery and the first line read the object, the next two do not &&
	test "$(kstatus_gets)" = 2 &&
	jq -s -e "length == 3 and all(.ok == true and .code == 200)" out &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Available\"}" w1.json
'

# kstatus_fed SECONDS: kstatus --coalesce 0 started on the FIFO to-kstatus, written through fd 9 (out, err)
kstatus_fed () {
	rm -f to-kstatus out && mkfifo to-kstatus &&
	{ timeout "$1" kstatus --coalesce 0 <to-kstatus >out 2>err & } &&
	kstatus_pid=$! &&
	exec 9>to-kstatus
}

# second_read_once: kstatus_fed's input ended, it exited 0; since the counters were reset it read the
# object once, both its lines were written, and w1's status is the second's, Available
second_read_once () {
	exec 9>&- &&
	wait "$kstatus_pid" &&
	test "$(kstatus_gets)" = 1 &&
	jq -s -e "length == 2 and all(.ok == true)" out &&
	get_w w1 &&
	jq -e ".status == {\"phase\":\"Available\"}" w1.json
}

test_expect_success 'the object changed by someone else after a write here: read again, the status written is right' '
	get_w w1 &&
	uid=$(jq -r .metadata.uid w1.json) &&
	kstatus_fed 30 &&
	status_line w1 "$uid" "{\"phase\":\"Processing\",\"message\":\"mine\"}" >&9 &&
	test_wait_for 10 test -s out &&
	: someone else writes the status meanwhile &&
	ksim_curl -f -o patched.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"status\":{\"phase\":\"Failed\",\"other\":1}}" "/apis/test.example.org/v1/namespaces/ns/widgets/w1/status" &&
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >/dev/null &&
	status_line w1 "$uid" "{\"phase\":\"Available\"}" >&9 &&
	second_read_once
'

# (30 s: by then the watch has brought a status written back to ireconcile, whose lines say what is stored)
test_expect_success 'a status written here is forgotten after 30 s: a line without what is stored then reads the object' '
	get_w w1 &&
	uid=$(jq -r .metadata.uid w1.json) &&
	kstatus_fed 90 &&
	status_line w1 "$uid" "{\"phase\":\"Processing\",\"message\":\"early\"}" >&9 &&
	test_wait_for 10 test -s out &&
	sleep 31 &&
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >/dev/null &&
	status_line w1 "$uid" "{\"phase\":\"Available\"}" >&9 &&
	second_read_once
'

test_expect_success 'cleanup' '
	ksim_stop
'

test_done
