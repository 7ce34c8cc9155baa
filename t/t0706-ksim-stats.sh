#!/bin/sh
test_description='ksim: request counters by user agent and verb (GET/POST /ksim/stats), bytes sent by verb and by resource, the -v request log'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

command -v ksim >/dev/null || test_skip_all 'ksim not built'
ksim_start -v || exit 1

test_expect_success 'requests are counted by agent and verb, a watch as WATCH, admin paths not at all' '
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >reset.json &&
	ksim_curl -A t/get -o /dev/null /api/v1/namespaces/default/configmaps &&
	ksim_curl -A t/get -o /dev/null /api/v1/namespaces/default &&
	ksim_curl -A t/write -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"c\"}}" /api/v1/namespaces/default/configmaps &&
	ksim_curl -A t/write -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"data\":{\"k\":\"v\"}}" /api/v1/namespaces/default/configmaps/c &&
	ksim_curl -A t/write -o /dev/null -X DELETE /api/v1/namespaces/default/configmaps/c &&
	ksim_curl -A t/write -o /dev/null -X DELETE /api/v1/namespaces/default/configmaps/c &&
	ksim_curl -A t/watch -o /dev/null "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1" &&
	ksim_admin cut-watches &&
	curl -sS -f -m 10 "$KSIM_URL/ksim/stats" >stats.json &&
	jq -c "[.requests, .writes, .byVerb, .byAgent]" stats.json >actual &&
	cat >expect <<-\EOF &&
	[7,4,{"GET":2,"WATCH":1,"POST":1,"PUT":0,"PATCH":1,"DELETE":2,"OTHER":0},{"t/get":{"GET":2},"t/write":{"POST":1,"PATCH":1,"DELETE":2},"t/watch":{"WATCH":1}}]
	EOF
	test_cmp expect actual
'

test_expect_success 'the request log (-v) names the user agent (and a POST the object), its time to the millisecond' '
	jq -c "select(.msg == \"request\" and .userAgent == \"t/write\") | [.method, .path, .code, .name]" "$KSIM_LOG" >actual &&
	cat >expect <<-\EOF &&
	["POST","/api/v1/namespaces/default/configmaps",201,"c"]
	["PATCH","/api/v1/namespaces/default/configmaps/c",200,null]
	["DELETE","/api/v1/namespaces/default/configmaps/c",200,null]
	["DELETE","/api/v1/namespaces/default/configmaps/c",404,null]
	EOF
	test_cmp expect actual &&
	jq -r "select(.msg == \"request\") | .time" "$KSIM_LOG" >times &&
	test "$(wc -l <times)" -ge 7 &&
	! grep -Ev "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3,9}Z\$" times
'

test_expect_success 'the bytes of the answers are counted by agent and verb, a watch as its events go out' '
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >reset.json &&
	ksim_curl -A "t/get (a)" -o list.json /api/v1/namespaces/default/configmaps &&
	ksim_curl -A "t/get (a)" -o ns.json /api/v1/namespaces/default &&
	ksim_curl -A "t/get (a)" -o none.json /api/v1/namespaces/default/configmaps/none &&
	ksim_curl -A "t/get (a)" -o api.json /api &&
	ksim_curl -A "t/get (a)" -o apps.json /apis/apps/v1 &&
	ksim_curl -A "t/write (a)" -o made.json -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"d\"}}" /api/v1/namespaces/default/configmaps &&
	ksim_curl -A "t/watch (b)" -o watch.out "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1" &&
	grep -q "\"name\":\"d\"" watch.out &&
	curl -sS -f -m 10 "$KSIM_URL/ksim/stats" >stats.json &&
	jq -c .bytesByAgent stats.json >actual &&
	echo "{\"t/get (a)\":{\"GET\":$(cat list.json ns.json none.json api.json apps.json | wc -c)},\"t/write (a)\":{\"POST\":$(wc -c <made.json)},\"t/watch (b)\":{\"WATCH\":$(wc -c <watch.out)}}" >expect &&
	test_cmp expect actual
'

test_expect_success 'and by agent and resource, as kubectl names it: discovery under (discovery)' '
	jq -S -c .bytesByAgentResource stats.json >actual &&
	echo "{\"t/get (a)\":{\"configmaps\":$(cat list.json none.json | wc -c),\"namespaces\":$(wc -c <ns.json),\"(discovery)\":$(cat api.json apps.json | wc -c)},\"t/write (a)\":{\"configmaps\":$(wc -c <made.json)},\"t/watch (b)\":{\"configmaps\":$(wc -c <watch.out)}}" |
	jq -S -c . >expect &&
	test_cmp expect actual &&
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >reset.json &&
	ksim_curl -A "t/get (c)" -o deploys.json /apis/apps/v1/namespaces/default/deployments &&
	ksim_curl -A "t/get (c)" -o nothing.json /apis/apps/v1/namespaces/default/nothings &&
	ksim_curl -A "t/get (c)" -o version.json /version &&
	curl -sS -f -m 10 "$KSIM_URL/ksim/stats" >stats.json &&
	jq -S -c .bytesByAgentResource stats.json >actual &&
	echo "{\"t/get (c)\":{\"deployments.apps\":$(wc -c <deploys.json),\"(discovery)\":$(cat nothing.json version.json | wc -c)}}" |
	jq -S -c . >expect &&
	test_cmp expect actual
'

test_expect_success 'a reset sets every counter to zero; a bad body is refused' '
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >reset.json &&
	jq -c "[.requests, .writes, .byAgent, .bytesByAgent, .bytesByAgentResource]" reset.json >actual &&
	echo "[0,0,{},{},{}]" >expect &&
	test_cmp expect actual &&
	curl -sS -m 10 -o bad.json -w "%{http_code}\n" -X POST -d "[1]" "$KSIM_URL/ksim/stats" >code &&
	echo 400 >expect &&
	test_cmp expect code &&
	curl -sS -m 10 -o /dev/null -w "%{http_code}\n" -X PUT "$KSIM_URL/ksim/stats" >code &&
	echo 405 >expect &&
	test_cmp expect code
'

test_done
