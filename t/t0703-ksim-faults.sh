#!/bin/sh
test_description='ksim faults on demand: 429/500/503, latency, cut, stalled and expired watches, compaction (flags and POST /ksim/faults)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

CM=/api/v1/namespaces/default/configmaps

faults () {
	curl -sS -f -m 10 -X POST -H "Content-Type: application/json" -d "$1" "$KSIM_URL/ksim/faults" >faults.out
}

mkcm () {
	curl -sS -f -m 10 -o /dev/null -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"$1\"}}" "$KSIM_URL$CM"
}

ksim_start --no-simulate

test_expect_success '429: plain text and Retry-After: 1, for `count` requests, then served again' '
	faults "{\"rate\": 1, \"code\": 429, \"count\": 2, \"path\": \"$CM\"}" &&
	curl -sS -m 10 -D h1 -o b1 "$KSIM_URL$CM" &&
	curl -sS -m 10 -D h2 -o b2 "$KSIM_URL$CM" &&
	curl -sS -m 10 -D h3 -o b3 "$KSIM_URL$CM" &&
	head -n 1 h1 | grep "^HTTP/1.1 429" &&
	grep -i "^Retry-After: 1" h1 &&
	grep -i "^Content-Type: text/plain" h1 &&
	echo "Too many requests, please try again later." >expect &&
	test_cmp expect b1 &&
	head -n 1 h2 | grep "^HTTP/1.1 429" &&
	head -n 1 h3 | grep "^HTTP/1.1 200" &&
	jq -e ".kind == \"ConfigMapList\"" b3 &&
	curl -sS -m 10 -D h4 -o b4 "$KSIM_URL/api/v1/namespaces" &&
	head -n 1 h4 | grep "^HTTP/1.1 200" &&
	curl -sS -f -m 10 "$KSIM_URL/ksim/faults" >state &&
	jq -e ".injected == 2 and .rate == 0" state
'

test_expect_success 'an unknown fault setting is 400, named, with the known ones' '
	curl -sS -m 10 -o bad.out -w "%{http_code}\n" -X POST -d "{\"bogus\": 1}" "$KSIM_URL/ksim/faults" >code &&
	echo 400 >expect && test_cmp expect code &&
	grep "^invalid fault settings: unknown setting .bogus. (known: reset, rate, code, count, path, latency," bad.out
'

test_expect_success 'a port in use: ksim says why it cannot listen, exit 111' '
	port=$(echo "$KSIM_URL" | sed "s/.*://") &&
	test_expect_code 111 timeout 10 ksim --port "$port" --kubeconfig busy.kc </dev/null >/dev/null 2>busy.err 3>&- 4>&- &&
	grep "unable to listen on .127.0.0.1:$port.: Address already in use" busy.err
'

test_expect_success '500: a Status InternalError; 503: ServiceUnavailable with Retry-After' '
	faults "{\"rate\": 1, \"code\": 500, \"count\": 1, \"path\": \"$CM\"}" &&
	curl -sS -m 10 -D h1 -o b1 "$KSIM_URL$CM" &&
	head -n 1 h1 | grep "^HTTP/1.1 500" &&
	jq -e ".kind == \"Status\" and .code == 500 and .reason == \"InternalError\" and
		(.message | startswith(\"Internal error occurred: \"))" b1 &&
	faults "{\"rate\": 1, \"code\": 503, \"count\": 1, \"path\": \"$CM\"}" &&
	curl -sS -m 10 -D h2 -o b2 "$KSIM_URL$CM" &&
	head -n 1 h2 | grep "^HTTP/1.1 503" &&
	grep -i "^Retry-After: 1" h2 &&
	jq -e ".kind == \"Status\" and .code == 503 and .reason == \"ServiceUnavailable\"" b2
'

test_expect_success 'kapply sees 429, 500 and 503 and retries them to success' '
	cat >cm.yaml <<-\EOT &&
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: retried, namespace: default}
	data: {a: "1"}
	EOT
	for code in 429 500 503; do
		faults "{\"rate\": 1, \"code\": $code, \"count\": 2, \"path\": \"$CM/retried\"}" &&
		timeout 60 kapply -f cm.yaml >out 2>err &&
		grep -c "retrying" err >n && test "$(cat n)" -ge 2 &&
		curl -sS -f -m 10 "$KSIM_URL/ksim/faults" >state &&
		jq -e ".rate == 0 and .count == 0" state || return 1
	done &&
	curl -sS -f -m 10 "$KSIM_URL$CM/retried" >cm.json &&
	jq -e ".data.a == \"1\"" cm.json
'

test_expect_success 'a share of requests: rate 0.5 fails some and serves some' '
	faults "{\"rate\": 0.5, \"code\": 503, \"count\": -1, \"path\": \"$CM\"}" &&
	i=0 && : >codes &&
	while test $i -lt 40; do
		curl -sS -m 10 -o /dev/null -w "%{http_code}\n" "$KSIM_URL$CM" >>codes
		i=$((i + 1))
	done &&
	faults "{\"reset\": true}" &&
	test $(grep -c "^503" codes) -ge 5 &&
	test $(grep -c "^200" codes) -ge 5 &&
	test $(grep -cv "^503\|^200" codes) = 0
'

test_expect_success 'latency: every API request waits' '
	faults "{\"latency\": \"600ms\"}" &&
	curl -sS -m 10 -o /dev/null -w "%{time_total}\n" "$KSIM_URL$CM" >slow &&
	faults "{\"latency\": 0}" &&
	curl -sS -m 10 -o /dev/null -w "%{time_total}\n" "$KSIM_URL$CM" >fast &&
	awk "{ exit !(\$1 >= 0.6) }" slow &&
	awk "{ exit !(\$1 < 0.5) }" fast
'

test_expect_success 'cut every watch now, and every N seconds' '
	faults "{\"cutWatches\": true}" &&
	start=$(date +%s) &&
	{ curl -sS -N -m 20 -o w1 "$KSIM_URL$CM?watch=true&timeoutSeconds=15" & } &&
	sleep 0.5 &&
	faults "{\"cutWatches\": true}" &&
	wait &&
	test $(( $(date +%s) - start )) -lt 5 &&
	faults "{\"cutWatchesEvery\": \"1s\"}" &&
	start=$(date +%s) &&
	curl -sS -N -m 20 -o w2 "$KSIM_URL$CM?watch=true&timeoutSeconds=15" &&
	curl -sS -N -m 20 -o w3 "$KSIM_URL$CM?watch=true&timeoutSeconds=15" &&
	test $(( $(date +%s) - start )) -lt 6 &&
	faults "{\"cutWatchesEvery\": 0}" &&
	curl -sS -f -m 10 "$KSIM_URL/ksim/faults" >state &&
	jq -e ".cuts >= 2" state
'

test_expect_success 'stalled watches: connection open, no bytes, until the stall ends' '
	rv=$(curl -sS -f -m 10 "$KSIM_URL$CM" | jq -r .metadata.resourceVersion) &&
	{ curl -sS -N -m 20 -o w "$KSIM_URL$CM?watch=true&resourceVersion=$rv&timeoutSeconds=10" & } &&
	sleep 0.5 &&
	faults "{\"stallWatches\": true}" &&
	mkcm stalled &&
	sleep 1.5 &&
	test ! -s w &&
	faults "{\"stallWatches\": false}" &&
	test_wait_for 5 grep -q "\"stalled\"" w &&
	faults "{\"stallWatches\": \"1s\"}" &&
	mkcm stalled2 &&
	test_wait_for 5 grep -q "\"stalled2\"" w &&
	wait
	curl -sS -f -m 10 "$KSIM_URL/ksim/faults" >state &&
	jq -e ".stalledWatches >= 2 and .stallWatches == false" state
'

test_expect_success 'an ERROR 410 event on every watch; compaction expires old resourceVersions' '
	rv=$(curl -sS -f -m 10 "$KSIM_URL$CM" | jq -r .metadata.resourceVersion) &&
	{ curl -sS -N -m 20 -o w "$KSIM_URL$CM?watch=true&resourceVersion=$rv&timeoutSeconds=10" & } &&
	sleep 0.5 &&
	faults "{\"errorWatches\": true}" &&
	wait &&
	jq -e "select(.type == \"ERROR\") | .object.code == 410 and .object.reason == \"Expired\"" w &&
	mkcm after-rv &&
	faults "{\"compact\": true}" &&
	curl -sS -m 10 -o w2 "$KSIM_URL$CM?watch=true&resourceVersion=$rv&timeoutSeconds=2" &&
	jq -e "select(.type == \"ERROR\") | .object.code == 410" w2 &&
	test $(jq -s "length" w2) = 1
'

test_expect_success 'bad settings are refused with 400' '
	curl -sS -m 10 -o b -w "%{http_code}" -X POST -d "{\"code\": 404}" "$KSIM_URL/ksim/faults" >code &&
	test "$(cat code)" = 400 &&
	grep "code: 429, 500 or 503" b
'

test_expect_success 'the same knobs as flags: --fault-rate/--fault-code/--fault-path, --fault-latency, --fault-cut-every' '
	ksim_stop &&
	(
		ksim_start --no-simulate --fault-rate 1 --fault-code 500 --fault-path /api/v1/namespaces/default/secrets \
			--fault-latency 300ms --fault-cut-every 1s &&
		curl -sS -m 10 -o /dev/null -w "%{http_code} %{time_total}\n" "$KSIM_URL/api/v1/namespaces/default/secrets" >r1 &&
		curl -sS -m 10 -o /dev/null -w "%{http_code} %{time_total}\n" "$KSIM_URL$CM" >r2 &&
		awk "{ exit !(\$1 == 500 && \$2 >= 0.3) }" r1 &&
		awk "{ exit !(\$1 == 200 && \$2 >= 0.3) }" r2 &&
		start=$(date +%s) &&
		curl -sS -N -m 20 -o w "$KSIM_URL$CM?watch=true&timeoutSeconds=15" &&
		test $(( $(date +%s) - start )) -lt 5 &&
		ksim_stop
	)
'

test_done
