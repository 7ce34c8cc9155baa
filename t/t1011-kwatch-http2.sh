#!/bin/sh
test_description='over HTTP/2 (kube-apiserver speaks it over TLS; ksim does not, so an HTTP/2 front stands before it), the per-namespace watches of kwatch are streams of one connection, and so are the requests of kapply'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

# node's http2 module is the front (scripts/deps.sh --test installs nodejs); openssl makes its key.
command -v node >/dev/null || test_skip_all 'node is missing (apt-get install nodejs): no HTTP/2 front'
command -v openssl >/dev/null || test_skip_all 'openssl is missing'

ksim_start --no-simulate
L=cp.iot.sap/operator=o
N=20

test_expect_success 'setup: an HTTP/2 front over TLS before ksim; 20 labelled namespaces with a Secret each' '
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem -out cert.pem \
		-days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>openssl.err &&
	{ node "$FIXTURES/h2front.js" "${KSIM_URL##*:}" key.pem cert.pem port stats.json 2>front.err &
	  echo $! >front.pid; } &&
	test_wait_for 10 test -s port &&
	cat >h2.kubeconfig <<-EOF &&
	apiVersion: v1
	kind: Config
	clusters:
	- name: h2
	  cluster: {server: "https://127.0.0.1:$(cat port)", certificate-authority: "$TRASH/cert.pem"}
	users:
	- {name: u, user: {}}
	contexts:
	- name: h2
	  context: {cluster: h2, user: u, namespace: n1}
	current-context: h2
	EOF
	i=1 &&
	while test $i -le $N; do
		curl -sS -f -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"n$i\",\"labels\":{\"cp.iot.sap/operator\":\"o\"}}}" \
			"$KSIM_URL/api/v1/namespaces" >/dev/null &&
		curl -sS -f -X POST -H "Content-Type: application/json" -d "{\"metadata\":{\"name\":\"s\"}}" \
			"$KSIM_URL/api/v1/namespaces/n$i/secrets" >/dev/null || return 1
		i=$((i + 1))
	done
'

test_expect_success 'kwatch: the namespaces watch and the 20 Secrets watches, open together, are streams of one HTTP/2 connection' '
	{ KUBECONFIG=h2.kubeconfig timeout 60 kwatch "namespaces:l=$L" "secrets@~" >kw.out 2>kw.err &
	  echo $! >kw.pid; } &&
	test_when_finished "kill \$(cat kw.pid) 2>/dev/null; :" &&
	test_wait_for 20 grep -q BOOKMARK kw.out &&
	test "$(grep -c "\"kind\":\"Secret\"" kw.out)" = $N &&
	jq -e ".open >= $((N + 1))" stats.json &&
	jq -c "[.sessions, .maxOpen >= $((N + 1))]" stats.json >actual &&
	echo "[1,true]" >expect &&
	test_cmp expect actual &&
	kill -TERM $(cat kw.pid) &&
	wait $(cat kw.pid) &&
	test_no_sanitizer_report kw.err
'

test_expect_success 'kapply: 20 applies, 8 in flight, over one HTTP/2 connection' '
	sessions=$(jq .sessions stats.json) &&
	i=1 &&
	while test $i -le $N; do
		echo "{\"op\":\"apply\",\"primary\":\"o/x\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c$i\",\"namespace\":\"n$i\"},\"data\":{\"k\":\"v\"}}}" ||
			return 1
		i=$((i + 1))
	done >in &&
	timeout 60 kapply --kubeconfig h2.kubeconfig --concurrency 8 <in >ka.out 2>ka.err &&
	test_no_sanitizer_report ka.err &&
	jq -e -s "length == $N and all(.ok)" ka.out &&
	test "$(jq .sessions stats.json)" = $((sessions + 1))
'

test_expect_success 'the front and ksim stop' '
	kill $(cat front.pid) &&
	ksim_stop
'

test_done
