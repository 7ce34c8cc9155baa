#!/bin/sh
test_description='ksim: unknown fields of built-in kinds are dropped and warned about (fieldValidation Warn, the default), refused (Strict), or dropped silently (Ignore)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_start --no-simulate
ksim_kubectls

DEP='{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"NAME","foo":1},"spec":{"foo":2,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"},"bar":0},"spec":{"bar":1,"containers":[{"name":"c","image":"i","baz":3}]}}},"extra":true}'

# post NAME QUERY: creates the Deployment NAME; headers in h, body in b.json, the code printed
post () {
	echo "$DEP" | sed "s/NAME/$1/" |
		ksim_curl -s -D h -o b.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" -d @- \
			"/apis/apps/v1/namespaces/default/deployments$2"
}

test_expect_success 'Warn (the default): 201, a Warning header for each unknown field, the fields not stored' '
	post d1 >code &&
	echo 201 >expect && test_cmp expect code &&
	tr -d "\r" <h | grep "^Warning:" >actual &&
	cat >expect <<-\EOT &&
	Warning: 299 - "unknown field \"extra\""
	Warning: 299 - "unknown field \"metadata.foo\""
	Warning: 299 - "unknown field \"spec.foo\""
	Warning: 299 - "unknown field \"spec.template.metadata.bar\""
	Warning: 299 - "unknown field \"spec.template.spec.bar\""
	Warning: 299 - "unknown field \"spec.template.spec.containers[0].baz\""
	EOT
	test_cmp expect actual &&
	ksim_curl -s -o d1.json /apis/apps/v1/namespaces/default/deployments/d1 &&
	jq -e "(has(\"extra\") or (.metadata | has(\"foo\")) or (.spec | has(\"foo\")) or
		(.spec.template.spec | has(\"bar\")) or (.spec.template.spec.containers[0] | has(\"baz\"))) | not" d1.json &&
	jq -e ".spec.template.spec.containers[0].image == \"i\"" d1.json
'

test_expect_success 'Strict: 400 naming the fields, nothing stored' '
	post d2 "?fieldValidation=Strict" >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".reason == \"BadRequest\" and (.message | startswith(\"strict decoding error: unknown field \\\"extra\\\", unknown field \\\"metadata.foo\\\"\"))" b.json &&
	ksim_curl -s -o /dev/null -w "%{http_code}\n" /apis/apps/v1/namespaces/default/deployments/d2 >code &&
	echo 404 >expect && test_cmp expect code
'

test_expect_success 'Ignore: 201, no warning, the fields dropped' '
	post d3 "?fieldValidation=Ignore" >code &&
	echo 201 >expect && test_cmp expect code &&
	! grep -i "^warning" h &&
	jq -e "has(\"extra\") | not" b.json
'

test_expect_success 'updates and patches are checked too: a Service spec, a ConfigMap top level' '
	ksim_curl -s -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"s\"},\"spec\":{\"ports\":[{\"port\":80}]}}" /api/v1/namespaces/default/services &&
	ksim_curl -s -D h -o b.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"sessionAffinty\":\"None\"}}" /api/v1/namespaces/default/services/s &&
	tr -d "\r" <h | grep "^Warning: 299 - \"unknown field \\\\\"spec.sessionAffinty\\\\\"\"" &&
	ksim_curl -s -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"b\"}}" /api/v1/namespaces/default/configmaps &&
	ksim_curl -s -o b.json -w "%{http_code}\n" -X PUT -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"b\"},\"datum\":1}" \
		"/api/v1/namespaces/default/configmaps/c?fieldValidation=Strict" >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".message == \"strict decoding error: unknown field \\\"datum\\\"\"" b.json
'

test_expect_success 'kubectl: a warning on stderr with --validate=warn, an error by default (Strict)' '
	for v in $versions; do
		n=$(basename $v | tr . -) &&
		cat >cm.yaml <<-EOT &&
		apiVersion: v1
		kind: ConfigMap
		metadata:
		  name: $n
		data: {a: b}
		datum: x
		EOT
		test_must_fail "$v" apply --server-side -f cm.yaml 2>err &&
		grep "unknown field \"datum\"" err &&
		"$v" apply --server-side --validate=warn -f cm.yaml >out 2>err &&
		grep "Warning: unknown field \"datum\"" err || { echo "$v:"; cat err; return 1; }
	done
'

test_expect_success 'the known fields of every kind pass without a warning (the fixtures of t0710)' '
	ksim_curl -s -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"all\"}}" /api/v1/namespaces &&
	kubectl -n all create -f "$TEST_DIRECTORY/t0710-ksim-builtin-kinds/kinds.yaml" >out 2>err &&
	! grep -i "warning" err
'

ksim_stop

test_done
