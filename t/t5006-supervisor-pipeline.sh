#!/bin/sh
test_description='iot-operator with the real stages on ksim: ready once kwatch has listed, stage and reconcile metrics, drain'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

for t in ksim kwatch ireconcile kapply kstatus; do
	test -x "$KOP_BIN/$t" || test_skip_all "no $t yet"
done
test_kubectl

ksim_start

test_expect_success 'setup: the CRD and the operator namespace' '
	timeout 30 "$KUBECTL" apply -f "$PROJECT_ROOT/deploy/crd.yaml" -f "$PROJECT_ROOT/deploy/namespace.yaml" >out &&
	timeout 30 "$KUBECTL" wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s
'

# start: the supervisor (no leader election, metrics on a free port) in the background, its pid in
# sup.pid, its exit code in sup.code once it ends, its log in sup.err; $port its metrics port
start () {
	{ (
		OPERATOR_NAME=devawsk8s iot-operator --leader-elect=false --metrics-addr 127.0.0.1:0 2>sup.err &
		echo $! >sup.pid
		wait $!
		echo $? >sup.code.tmp && mv sup.code.tmp sup.code
	) & } &&
	test_wait_for 10 grep -q "\"port\":" sup.err &&
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" sup.err | head -n 1)
}

stop () {
	test -f sup.code && return 0
	kill -TERM "$(cat sup.pid)"
	test_wait_for 20 test -f sup.code || kill -9 "$(cat sup.pid)"
}

test_expect_success 'the pipeline runs; ready once the initial lists are in; the stages report metrics' '
	test_when_finished stop &&
	start &&
	test_wait_for 20 grep -q "initial lists are in" sup.err &&
	curl -s -o ready.body -w "%{http_code}" "http://127.0.0.1:$port/readyz" >ready.code &&
	test "$(cat ready.code)" = 200 &&
	test_wait_for 10 eval "curl -s http://127.0.0.1:$port/metrics >metrics && grep -q \"^kwatch_events_total{type=\\\"ADDED\\\"} [1-9]\" metrics" &&
	grep "^iot_operator_stage_restarts_total{stage=\"kwatch\"} 0" metrics &&
	grep "^iot_operator_stage_resident_memory_bytes{stage=\"ireconcile\"} [1-9]" metrics &&
	timeout 30 "$KUBECTL" apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >apply.out &&
	test_wait_for 20 eval "curl -s http://127.0.0.1:$port/metrics >metrics && grep -q \"^controller_runtime_reconcile_total{controller=\\\"iotservice\\\",result=\\\"[a-z_]*\\\"} [1-9]\" metrics" &&
	grep "^workqueue_depth{name=\"iotservice\"} [0-9]" metrics &&
	kill -TERM "$(cat sup.pid)" &&
	test_wait_for 20 test -f sup.code &&
	test "$(cat sup.code)" = 0 &&
	! grep "restarting the pipeline" sup.err &&
	test_no_sanitizer_report sup.err
'

# get PATH: the status code in http.code, the body in http.body
get () {
	curl -s -o http.body -w "%{http_code}" "http://127.0.0.1:$port$1" >http.code
}

test_expect_success 'a program that cannot work: said once, not restarted, /readyz names it, /healthz answers; SIGHUP retries' '
	test_when_finished stop &&
	rm -f sup.code sup.pid sup.err &&
	mkdir prog &&
	cp -R "$PROJECT_ROOT/pipeline/iotservice" "$PROJECT_ROOT/pipeline/lib" prog/ &&
	sed -i "12s/\$/ )))/" prog/iotservice/sync.jq &&
	{ (
		OPERATOR_NAME=devawsk8s iot-operator -v --leader-elect=false --metrics-addr 127.0.0.1:0 \
			--program "$TRASH/prog/iotservice" 2>sup.err &
		echo $! >sup.pid
		wait $!
		echo $? >sup.code.tmp && mv sup.code.tmp sup.code
	) & } &&
	test_wait_for 10 grep -q "\"port\":" sup.err &&
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" sup.err | head -n 1) &&
	test_wait_for 20 grep -q "cannot work" sup.err &&
	grep -q "cannot work" sup.err &&
	# the old backoff restarted it after 1 s, 2 s, 4 s: 5 s sees any restart
	sleep 5 &&
	grep -c "started stage .ireconcile." sup.err >starts &&
	echo 1 >expect && test_cmp expect starts &&
	! grep -e "; restarting the pipeline" -e "pipeline started" -e "started stage .kwatch." sup.err &&
	jq -c "select(.level == \"error\")" sup.err >errors &&
	grep -c . errors >count && echo 2 >expect && test_cmp expect count &&
	jq -e -s "map(select(.prog == \"ireconcile\")) | length == 1 and
		(.[0].msg | test(\"prog/iotservice/sync.jq.*syntax error.* at [^ ]*prog/iotservice/sync.jq, line 12\"))" errors &&
	jq -e -s "map(select(.prog == \"iot-operator\")) | length == 1 and
		(.[0].error | test(\"^ireconcile: .*prog/iotservice/sync.jq.*syntax error.* at [^ ]*prog/iotservice/sync.jq, line 12\")) and
		.[0].program == \"$TRASH/prog/iotservice\"" errors &&
	get /readyz && test "$(cat http.code)" = 503 &&
	grep "^not ready: the program .$TRASH/prog/iotservice. cannot work: ireconcile: .*prog/iotservice/sync.jq.*syntax error.* at [^ ]*prog/iotservice/sync.jq, line 12" http.body &&
	get /healthz && test "$(cat http.code)" = 200 &&
	get /metrics && test "$(cat http.code)" = 200 &&
	grep "^iot_operator_ready 0" http.body &&

	# SIGHUP checks the program again: fixed, the pipeline starts and goes ready
	cp "$PROJECT_ROOT/pipeline/iotservice/sync.jq" prog/iotservice/sync.jq &&
	kill -HUP "$(cat sup.pid)" &&
	test_wait_for 20 grep -q "initial lists are in" sup.err &&
	grep -q "initial lists are in" sup.err &&
	grep "SIGHUP: checking the program again" sup.err &&
	get /readyz && test "$(cat http.code)" = 200 &&
	kill -TERM "$(cat sup.pid)" &&
	test_wait_for 20 test -f sup.code &&
	test "$(cat sup.code)" = 0 &&
	grep -c "cannot work" sup.err >count && echo 1 >expect && test_cmp expect count &&
	test_no_sanitizer_report sup.err
'

test_expect_success 'a standby checks the program too: /readyz names it, it never starts a pipeline' '
	test_when_finished stop &&
	rm -f sup.code sup.pid sup.err &&
	sed -i "12s/\$/ )))/" prog/iotservice/sync.jq &&
	cat >lease.yaml <<-\EOF &&
	apiVersion: coordination.k8s.io/v1
	kind: Lease
	metadata: {name: iot-operator-lock, namespace: devawsk8s}
	spec: {holderIdentity: another-replica, leaseDurationSeconds: 3600, renewTime: "2026-11-22T10:00:00.000000Z"}
	EOF
	timeout 30 "$KUBECTL" apply -f lease.yaml >out &&
	{ (
		OPERATOR_NAME=devawsk8s iot-operator -v --metrics-addr 127.0.0.1:0 \
			--program "$TRASH/prog/iotservice" 2>sup.err &
		echo $! >sup.pid
		wait $!
		echo $? >sup.code.tmp && mv sup.code.tmp sup.code
	) & } &&
	test_wait_for 10 grep -q "\"port\":" sup.err &&
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" sup.err | head -n 1) &&
	test_wait_for 20 grep -q "cannot work" sup.err &&
	grep -q "cannot work" sup.err &&
	grep "waiting for leadership" sup.err &&
	! grep "became leader" sup.err &&
	get /readyz && test "$(cat http.code)" = 503 &&
	grep "^not ready: the program .$TRASH/prog/iotservice. cannot work: ireconcile: .*sync.jq, line 12" http.body &&
	get /healthz && test "$(cat http.code)" = 200 &&
	grep -c "started stage .ireconcile." sup.err >starts &&
	echo 1 >expect && test_cmp expect starts &&
	test_no_sanitizer_report sup.err
'

faults_off () {
	curl -sS -m 10 -X POST -d "{\"reset\": true}" "$KSIM_URL/ksim/faults" >/dev/null
}

# writes: POST, PUT, PATCH and DELETE that ksim answered for the stages since its stats were reset
writes () {
	curl -sS -m 10 -o stats.json "$KSIM_URL/ksim/stats" &&
	jq "[.byAgent | to_entries[] | select(.key | startswith(\"iot-operator/k\")) | .value
		| (.POST // 0) + (.PUT // 0) + (.PATCH // 0) + (.DELETE // 0)] | add // 0" stats.json
}

test_expect_success 'SIGTERM before the initial lists are in: the stages stop at once, nothing written from the part of the state read' '
	test_when_finished "stop; faults_off" &&
	rm -f sup.code sup.pid sup.err &&
	: the example is there, Available: its Deployments cannot be read now &&
	curl -sS -f -X POST -d "{\"rate\": 1, \"code\": 500, \"path\": \"/apis/apps/v1/deployments\"}" "$KSIM_URL/ksim/faults" >/dev/null &&
	curl -sS -f -X POST -d "{\"reset\": true}" "$KSIM_URL/ksim/stats" >/dev/null &&
	start &&
	: the IoTService, its Namespace, Services, Secrets and Pods passed on to ireconcile &&
	test_wait_for 20 eval "curl -s http://127.0.0.1:$port/metrics >metrics && grep -q \"^kwatch_events_total{type=\\\"ADDED\\\"} [1-9][0-9]\" metrics" &&
	grep -q "^kwatch_events_total{type=\"ADDED\"} [1-9][0-9]" metrics &&
	kill -TERM "$(cat sup.pid)" &&
	test_wait_for 5 test -f sup.code &&
	test "$(cat sup.code)" = 0 &&
	! grep "initial lists are in" sup.err &&
	! grep "stages still running" sup.err &&
	test "$(writes)" = 0 &&
	test_no_sanitizer_report sup.err
'

test_done
