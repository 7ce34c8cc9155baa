#!/bin/sh
test_description='kstatus: a conflict re-reads the object and retries

A canned-reply server on loopback (t3003-kapply-retry/fake-api.py) answers
the first status patch with 409, as a real server does when the object
changed between the read and the write.'
. "${0%/*}/test-lib.sh"

. "$TEST_DIRECTORY/lib-fake-api.sh"

test_expect_success 'kstatus --help; bad usage exits 100' '
	kstatus --help >help &&
	grep "^usage: kstatus" help &&
	test_expect_code 100 kstatus --bogus 2>err &&
	test_expect_code 100 kstatus extra-argument 2>err &&
	test_expect_code 100 kstatus --kubeconfig /nonexistent </dev/null >out 2>err
'

test_expect_success 'setup' '
	fake_api_start "$FIXTURES/script.json" ns
'

test_expect_success 'a 409 on the status patch reads again and patches with the new resourceVersion' '
	echo "{\"op\":\"status\",\"primary\":\"ns/web\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"u-web\"},\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"10.0.0.1\"}]}}}}" >in &&
	timeout 30 kstatus --kubeconfig kubeconfig <in >out 2>err &&
	jq -r "select(.path | startswith(\"/api/v1/namespaces/ns/services/web\")) | .method + \" \" + .path" requests.jsonl >actual &&
	cat >expect <<-\EOF &&
	GET /api/v1/namespaces/ns/services/web
	PATCH /api/v1/namespaces/ns/services/web/status
	GET /api/v1/namespaces/ns/services/web
	PATCH /api/v1/namespaces/ns/services/web/status
	EOF
	test_cmp expect actual &&
	jq -c -s "[.[] | select(.method == \"PATCH\") | {contentType, query, body}]" requests.jsonl >patches &&
	jq -e ".[0].body == {\"metadata\":{\"resourceVersion\":\"1\"},\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"10.0.0.1\"}]},\"old\":null}} and
		.[1].body.metadata.resourceVersion == \"2\" and
		.[1].contentType == \"application/merge-patch+json\" and .[1].query == \"fieldManager=iot-operator\"" patches &&
	jq -e -s "length == 1 and .[0].ok == true and .[0].for == \"status\" and .[0].resourceVersion == \"3\" and
		.[0].primary == \"ns/web\"" out
'

test_expect_success 'conflicts that never end are reported after --max-retries' '
	echo "{\"op\":\"status\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"busy\",\"namespace\":\"ns\"},\"status\":{\"x\":1}}}" >in &&
	timeout 30 kstatus --kubeconfig kubeconfig --max-retries 2 <in >out 2>err &&
	test $(jq -s "[.[] | select(.method == \"PATCH\" and (.path | endswith(\"/busy/status\")))] | length" requests.jsonl) = 3 &&
	jq -e ".ok == false and .code == 409 and .reason == \"Conflict\"" out
'

test_expect_success 'cleanup' '
	fake_api_stop
'

test_done
