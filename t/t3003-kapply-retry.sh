#!/bin/sh
test_description='kapply: transient faults retried (Retry-After honoured), permanent ones reported at once

Runs against a canned-reply server on loopback (fake-api.py) so that every
fault arrives exactly when the test wants it.'
. "${0%/*}/test-lib.sh"

. "$TEST_DIRECTORY/lib-fake-api.sh"

cm () {
	printf '{"op":"apply","primary":"ns/owner","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},"data":{"k":"v"}}}\n' "$1"
}

# requests METHOD NAME: how many requests for that object reached the server
requests () {
	jq -r --arg m "$1" --arg n "$2" 'select(.method == $m and (.path | endswith("/" + $n))) | .method' requests.jsonl | wc -l
}

# result_for NAME FILTER: exactly one result line in out is for NAME, and FILTER holds for it
result_for () {
	jq -e -s --arg n "$1" "map(select(.ref.name == \$n)) | length == 1 and (.[0] | $2)" "${3:-out}"
}

test_expect_success 'setup' '
	fake_api_start "$FIXTURES/script.json" ns
'

test_expect_success '429, 500, 503 and 504 are retried until the apply succeeds; Retry-After is honoured' '
	cm x >in &&
	start=$(date +%s%N) &&
	timeout 60 kapply --kubeconfig kubeconfig <in >out 2>err &&
	end=$(date +%s%N) &&
	test $(requests PATCH x) = 5 &&
	jq -e -s "length == 1 and .[0].ok == true and .[0].code == 200 and .[0].resourceVersion == \"7\" and
		.[0].for == \"apply\" and .[0].primary == \"ns/owner\" and .[0].ref.namespace == \"ns\"" out &&
	# two replies said Retry-After: 1
	test $(( (end - start) / 1000000 )) -ge 2000 &&
	grep -c "retrying apply" err >n && test "$(cat n)" = 4
'

test_expect_success 'the apply carries the field manager, force and the apply content type' '
	jq -e -s "[.[] | select(.path | endswith(\"/x\"))] | length == 5 and all(.contentType == \"application/apply-patch+yaml\" and
		.query == \"fieldManager=iot-operator&force=true\" and .body.metadata.namespace == \"ns\")" requests.jsonl
'

test_expect_success 'an apply from stdin is sent as its object came (its escapes), one a parse or a YAML reader could take otherwise as jq writes it' '
	cat >in <<-\EOF &&
	{"op":"apply","primary":"ns/owner","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"verbatim","namespace":"ns"},"data":{"k":"\u0041"},"x":1.5}}
	{"op":"apply","primary":"ns/owner","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"verbatim","namespace":"ns"},"data":{"k":"\u0041"},"x":1.50}}
	{"op":"apply","primary":"ns/owner","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"verbatim","namespace":"ns"},"data":{"k":"a\/b"},"x":1}}
	EOF
	timeout 60 kapply --kubeconfig kubeconfig <in >out 2>err &&
	jq -e -s "length == 3 and all(.ok == true and .ref.name == \"verbatim\")" out &&
	sed -n -e "1s/^{\"op\":\"apply\",\"primary\":\"ns\/owner\",\"object\"://" -e "1s/}\$//p" in >want &&
	cat >>want <<-\EOF &&
	{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"verbatim","namespace":"ns"},"data":{"k":"A"},"x":1.5}
	{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"verbatim","namespace":"ns"},"data":{"k":"a/b"},"x":1}
	EOF
	jq -r "select(.path | endswith(\"/verbatim\")) | .raw" requests.jsonl >got &&
	test_cmp want got
'

test_expect_success 'a transient failure that outlasts --max-retries is reported, exit 111 with -f' '
	cat >down.yaml <<-\EOF &&
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: down}
	EOF
	test_expect_code 111 timeout 60 kapply --kubeconfig kubeconfig --max-retries 2 -f down.yaml >out 2>err &&
	test $(requests PATCH down) = 3 &&
	jq -e -s "length == 1 and .[0].ok == false and .[0].code == 503 and .[0].reason == \"ServiceUnavailable\" and
		.[0].transient == true" out
'

test_expect_success 'permanent failures are reported at once with their reason and causes (exit 100 with -f)' '
	cat >perm.yaml <<-\EOF &&
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: invalid}
	---
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: secret}
	EOF
	test_expect_code 100 timeout 60 kapply --kubeconfig kubeconfig -f perm.yaml >out 2>err &&
	test $(requests PATCH invalid) = 1 &&
	test $(requests PATCH secret) = 1 &&
	jq -e -s "length == 2" out &&
	result_for invalid ".ok == false and .code == 422 and .reason == \"Invalid\" and
		.causes[0].field == \"data[bad key]\"" out &&
	result_for secret ".ok == false and .code == 403 and .reason == \"Forbidden\"" out &&
	grep "is forbidden" err
'

test_expect_success 'without force a conflict is reported naming the other manager and the field' '
	cm theirs >in &&
	timeout 60 kapply --kubeconfig kubeconfig --force-conflicts=false <in >out 2>err &&
	test $(requests PATCH theirs) = 1 &&
	jq -e -s "[.[] | select(.path | endswith(\"/theirs\"))][0].query == \"fieldManager=iot-operator\"" requests.jsonl &&
	jq -e ".ok == false and .code == 409 and .reason == \"Conflict\" and
		.message == \"Apply failed with 1 conflict: conflict with \\\"one\\\": .data.k\" and
		.causes[0].field == \".data.k\"" out
'

test_expect_success 'a deletion sends the uid precondition and propagation policy; not found after a retry is success' '
	printf "%s\n" "{\"op\":\"delete\",\"primary\":\"ns/owner\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"gone\",\"namespace\":\"ns\",\"uid\":\"u-gone\"}},\"propagationPolicy\":\"Foreground\"}" >in &&
	timeout 60 kapply --kubeconfig kubeconfig <in >out 2>err &&
	test $(requests DELETE gone) = 2 &&
	jq -e -s "[.[] | select(.method == \"DELETE\")][0].body == {\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",
		\"preconditions\":{\"uid\":\"u-gone\"},\"propagationPolicy\":\"Foreground\"}" requests.jsonl &&
	jq -e ".for == \"delete\" and .ok == true and .code == 404" out
'

test_expect_success '--qps and --burst limit the request rate' '
	for i in 1 2 3 4 5 6 7 8 9 10 11; do cm q || return 1; done >in &&
	start=$(date +%s%N) &&
	timeout 60 kapply --kubeconfig kubeconfig --qps 10 --burst 1 <in >out 2>err &&
	end=$(date +%s%N) &&
	test $(requests PATCH q) = 11 &&
	jq -e -s "length == 11 and all(.ok)" out &&
	# one token at once, then ten more at 10 per second
	test $(( (end - start) / 1000000 )) -ge 900
'

# sigterm_in_flight NAME SECONDS: kapply applies ConfigMap NAME read from a stdin
# that stays open SECONDS (in the background, its pid in pid); once the server
# has the request, SIGTERM; then its exit code in rc (out, err: its output)
sigterm_in_flight () {
	rm -f rc pid out err
	{ cm "$1"; sleep "$2"; } |
		sh -c "exec 6<&0; timeout 40 kapply --kubeconfig kubeconfig <&6 >out 2>err & echo \$! >pid; wait \$!; echo \$? >rc" &
	test_wait_for 10 grep -q "/$1" requests.jsonl &&
	kill -TERM $(cat pid) &&
	test_wait_for 20 test -s rc
}

test_expect_success 'SIGTERM: the request in flight finishes and its result is written, then exit 0' '
	sigterm_in_flight slow 5 &&
	test "$(cat rc)" = 0 &&
	jq -e ".ok == true and .resourceVersion == \"11\"" out
'

test_expect_success 'SIGTERM with a request that outlasts the 10 s drain: said unfinished, exit 111, nothing left held' '
	sigterm_in_flight stuck 14 &&
	test "$(cat rc)" = 111 &&
	grep -F "stopping with 1 operations unfinished" err &&
	test_no_sanitizer_report err &&
	! test -s out
'

test_expect_success 'a CRD that never becomes Established: its objects wait, then fail; the CRD times out' '
	cat >crd.yaml <<-\EOF &&
	apiVersion: apiextensions.k8s.io/v1
	kind: CustomResourceDefinition
	metadata: {name: gadgets.test.example.org}
	spec:
	  group: test.example.org
	  names: {kind: Gadget, plural: gadgets}
	  scope: Namespaced
	---
	apiVersion: test.example.org/v1
	kind: Gadget
	metadata: {name: g1}
	EOF
	test_expect_code 100 timeout 60 kapply --kubeconfig kubeconfig --crd-timeout 1s -f crd.yaml >out 2>err &&
	jq -e -s "length == 2 and
		(.[0] | .ref.kind == \"CustomResourceDefinition\" and .ok == false and .code == 504 and .reason == \"Timeout\") and
		(.[1] | .ref.kind == \"Gadget\" and .ok == false and .code == 404)" out &&
	# polled until the deadline: several reads of the CRD
	test $(requests GET gadgets.test.example.org) -ge 3 &&
	! grep -q "/gadgets/" requests.jsonl
'

test_expect_success 'a server that is not there: connection errors are retried, then reported (exit 111)' '
	fake_api_stop &&
	test_expect_code 111 timeout 60 kapply --kubeconfig kubeconfig --max-retries 1 -f down.yaml >out 2>err &&
	jq -e ".ok == false and .code == 0" out
'

test_expect_success 'in stream mode API errors never end the stream' '
	cm x >in && echo "{\"op\":\"status\",\"primary\":\"ns/owner\"}" >>in &&
	timeout 60 kapply --kubeconfig kubeconfig --max-retries 0 <in >out 2>err &&
	jq -e -s "length == 2 and .[0].op == \"result\" and .[0].ok == false and .[1].op == \"status\"" out
'

fake_api_stop
test_done
