#!/bin/sh
test_description='kwatch --record: the recorded file replays through ireconcile like the live stream;
the watches a program prints map onto one kwatch invocation'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
ksim_start || exit 1

NOW=2026-11-22T10:00:00Z
WIDGET_TEAM=blue
export WIDGET_TEAM

api () { # METHOD PATH BODY
	curl -sS -f -X "$1" -H "Content-Type: application/json" --data-binary "$3" "$KSIM_URL$2" >/dev/null
}

test_expect_success 'setup: the Widget CRD, a widget (its finalizer stored: children follow), the test program' '
	mkdir prog &&
	cp -R "$TEST_DIRECTORY/t2001-ireconcile-engine/widgets" prog/ &&
	cp -R "$PROJECT_ROOT/pipeline/lib" prog/lib &&
	jq -c "del(.status) | .metadata |= {name}" "$TEST_DATA/recordings/custom/crd-established.json" >crd.json &&
	api POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$(cat crd.json)" &&
	test_wait_for 10 curl -sf "$KSIM_URL/apis/test.example.org/v1" &&
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"blue\"}}" &&
	api POST /apis/test.example.org/v1/namespaces/blue/widgets \
		"{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w1\",\"namespace\":\"blue\",\"finalizers\":[\"test.example.org/cleanup\"]},\"spec\":{\"color\":\"red\"}}"
'

test_expect_success 'the program'\''s watches as one kwatch invocation' '
	ireconcile --print-watches prog/widgets >watches.jsonl &&
	jq -r ".resource + \"@\" + (if .namespace == \"\" then \"*\" else .namespace end)
		+ \":l=\" + .labelSelector + \":f=\" + .fieldSelector" watches.jsonl >specs &&
	test $(wc -l <specs) = 5 &&
	set -- &&
	while IFS= read -r spec; do set -- "$@" "$spec"; done <specs &&
	timeout 30 kwatch --once --record rec "$@" >out 2>err &&
	test_cmp out rec &&
	test $(grep -c "\"type\":\"BOOKMARK\"" out) = 1 &&
	jq -s -e "any(.[]; .type == \"ADDED\" and .object.kind == \"Widget\" and .object.metadata.name == \"w1\")" out
'

test_expect_success 'the record replays through ireconcile as the live stream did' '
	ireconcile --once --now $NOW prog/widgets <out >live.ops 2>live.err &&
	ireconcile --once --now $NOW prog/widgets <rec >replay.ops 2>replay.err &&
	test_cmp live.ops replay.ops &&
	jq -s -e "any(.[]; .op == \"apply\" and .object.kind == \"Namespace\" and .object.metadata.name == \"blue-w1\")" live.ops
'

test_expect_success 'stop ksim' '
	ksim_stop
'

test_done
