#!/bin/sh
test_description='iot-operator supervises stand-in stages: wiring, metrics, probes, restarts, drain, reaping'
. "${0%/*}/test-lib.sh"

STAGE_LOG="$TRASH/log"
STAGE_FIXTURES="$FIXTURES"
export STAGE_LOG STAGE_FIXTURES
mkdir prog

# Starts the supervisor in the background with the stand-in stages; its exit
# code lands in sup.code. Sets $port.
sup_start () {
	rm -rf "$STAGE_LOG" sup.code sup.err sup.pid &&
	mkdir "$STAGE_LOG" || return 1
	(
		OPERATOR_NAME=o iot-operator --leader-elect=false --stage-dir "$FIXTURES" \
			--metrics-addr 127.0.0.1:0 --program "$TRASH/prog" "$@" 2>sup.err &
		echo $! >sup.pid
		wait $!
		echo $? >sup.code.tmp && mv sup.code.tmp sup.code
	) &
	test_wait_for 10 grep -q "\"port\":" sup.err &&
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" sup.err | head -n 1) &&
	test -n "$port"
}

# Stops it (SIGTERM) and waits at most 15 s; then it is killed.
sup_stop () {
	test -f sup.pid || return 0
	kill -TERM "$(cat sup.pid)" 2>/dev/null
	test_wait_for 15 test -f sup.code || { kill -9 "$(cat sup.pid)"; return 1; }
}

# get PATH: the status code in http.code, the body in http.body
get () {
	curl -s -o http.body -w "%{http_code}" "http://127.0.0.1:$port$1" >http.code
}

# metric 'name{labels}': its value
metric () {
	get /metrics && awk -v k="$1" '$1 == k { print $2 }' http.body
}

# metric_is 'name{labels}' VALUE (for test_wait_for)
metric_is () {
	test "$(metric "$1")" = "$2"
}

# metric_at_least 'name{labels}' VALUE (for test_wait_for)
metric_at_least () {
	v=$(metric "$1") && test -n "$v" && test "$v" -ge "$2"
}

kapply_starts_at_least () {
	test "$(wc -l <"$STAGE_LOG/kapply.starts")" -ge "$1"
}

ready () {
	get /readyz && test "$(cat http.code)" = 200
}

test_expect_success 'usage: OPERATOR_NAME is required, bad flags, --help' '
	test_expect_code 100 iot-operator --leader-elect=false --program prog 2>err &&
	grep "OPERATOR_NAME must be set" err &&
	OPERATOR_NAME=o test_expect_code 100 iot-operator --leader-elect=maybe --program prog 2>err &&
	grep "invalid --leader-elect" err &&
	OPERATOR_NAME=o test_expect_code 100 iot-operator --lease-duration 5s --renew-deadline 6s 2>err &&
	grep "lease-duration > --renew-deadline" err &&
	: the default metrics address may be in use by another test: an address of its own &&
	OPERATOR_NAME=o test_expect_code 100 iot-operator --leader-elect=false --metrics-addr 127.0.0.1:0 \
		--program no/such/dir 2>err &&
	grep "unable to find the program .no/such/dir." err &&
	OPERATOR_NAME=o test_expect_code 100 iot-operator --kubeconfig "$TRASH/no-such-kubeconfig" \
		--metrics-addr 127.0.0.1:0 --program prog 2>err &&
	grep "no-such-kubeconfig" err &&
	! grep "serving metrics" err &&
	iot-operator --help >out &&
	grep -e "--metrics-addr" out && grep -e "--leader-elect" out && grep OPERATOR_NAME out
'

test_expect_success 'a bad --metrics-addr is refused at setup, before leader election, naming it' '
	printf "apiVersion: v1\nkind: Config\n" >empty-kubeconfig &&
	OPERATOR_NAME=o test_expect_code 100 iot-operator --kubeconfig "$TRASH/empty-kubeconfig" \
		--metrics-addr nonsense --program prog 2>err &&
	grep "invalid --metrics-addr .nonsense." err &&
	! grep -e "waiting for leadership" -e "serving metrics" -e "starting" err &&
	OPERATOR_NAME=o test_expect_code 100 iot-operator --kubeconfig "$TRASH/empty-kubeconfig" \
		--metrics-addr 127.0.0.1:99999 --program prog 2>err &&
	grep "invalid port in --metrics-addr .127.0.0.1:99999." err &&
	! grep "waiting for leadership" err &&
	OPERATOR_NAME=o test_expect_code 100 iot-operator --kubeconfig "$TRASH/empty-kubeconfig" \
		--metrics-addr nohost.example:8080 --program prog 2>err &&
	grep "invalid host in --metrics-addr .nohost.example:8080." err &&
	! grep "waiting for leadership" err
'

test_expect_success 'an address in use is a setup failure (111) naming it, before leader election' '
	test_when_finished sup_stop &&
	sup_start &&
	OPERATOR_NAME=o test_expect_code 111 iot-operator --kubeconfig "$TRASH/empty-kubeconfig" \
		--metrics-addr "127.0.0.1:$port" --program prog 2>err &&
	grep "unable to listen on .127.0.0.1:$port.: Address already in use" err &&
	! grep -e "waiting for leadership" -e "starting" err
'

test_expect_success 'the stages are wired: kwatch | ireconcile | kapply | kstatus, results back as feedback' '
	test_when_finished sup_stop &&
	sup_start --max-parallel-updates 7 --progress-deadline 2m &&
	test_wait_for 10 test -s "$STAGE_LOG/feedback" &&
	echo "-A iotservices.cp.iot.sap@o:l=:f= deployments.apps@*:l=app.kubernetes.io/managed-by=iot-operator,cp.iot.sap/operator=o:f= secrets@o:l=:f=metadata.name=image-pull-secret" >expect &&
	test_cmp expect "$STAGE_LOG/kwatch.args" &&
	echo "--feedback /dev/fd/3 $TRASH/prog" >expect &&
	test_cmp expect "$STAGE_LOG/ireconcile.args" &&
	cat >expect <<-\EOT &&
	GNUTLS_NO_IMPLICIT_INIT=1
	KOP_GNUTLS_OURS=1
	KOP_STATS_FD=4
	MAX_PARALLEL_UPDATES=7
	OPERATOR_NAME=o
	PROGRESS_DEADLINE_SECONDS=120
	EOT
	test_cmp expect "$STAGE_LOG/ireconcile.env" &&
	jq -e ".op == \"status\" and .primary == \"o/a\"" "$STAGE_LOG/feedback" &&
	test_wait_for 5 test -s "$STAGE_LOG/ireconcile.in" &&
	test_wait_for 5 grep -q MODIFIED "$STAGE_LOG/ireconcile.in" &&
	jq -r .type "$STAGE_LOG/ireconcile.in" >types &&
	printf "ADDED\nBOOKMARK\nMODIFIED\n" >expect &&
	test_cmp expect types &&
	grep -F "{\"time\":\"2026-11-22T10:00:00.000000Z\",\"level\":\"info\",\"prog\":\"kwatch\",\"msg\":\"stand-in kwatch started\"}" sup.err
'

test_expect_success 'a GNUTLS_NO_IMPLICIT_INIT of the user'"'"'s reaches the stages as it is, not marked ours' '
	test_when_finished "sup_stop; unset GNUTLS_NO_IMPLICIT_INIT" &&
	GNUTLS_NO_IMPLICIT_INIT=0 && export GNUTLS_NO_IMPLICIT_INIT &&
	sup_start &&
	test_wait_for 10 test -s "$STAGE_LOG/ireconcile.env" &&
	grep -x GNUTLS_NO_IMPLICIT_INIT=0 "$STAGE_LOG/ireconcile.env" &&
	! grep KOP_GNUTLS_OURS "$STAGE_LOG/ireconcile.env"
'

test_expect_success 'the kube options reach kwatch, kapply and kstatus' '
	test_when_finished sup_stop &&
	sup_start --kubeconfig "$TRASH/kc" --context ctx --request-timeout 5s &&
	for s in kwatch kapply kstatus
	do
		test_wait_for 10 test -s "$STAGE_LOG/$s.args" || return 1
	done &&
	echo "--kubeconfig $TRASH/kc --context ctx --request-timeout 5000ms" >expect &&
	test_cmp expect "$STAGE_LOG/kapply.args" &&
	test_cmp expect "$STAGE_LOG/kstatus.args" &&
	cut -d" " -f1-7 "$STAGE_LOG/kwatch.args" >actual &&
	echo "--kubeconfig $TRASH/kc --context ctx --request-timeout 5000ms -A" >expect &&
	test_cmp expect actual
'

test_expect_success '/healthz, /readyz only once the initial lists are in, /metrics sums the stages' '
	test_when_finished sup_stop &&
	KWATCH_WAIT=1 sup_start &&
	get /healthz && test "$(cat http.code)" = 200 &&
	test_wait_for 5 test -s "$STAGE_LOG/kwatch.args" &&
	get /readyz && test "$(cat http.code)" = 503 &&
	grep "not ready: the initial lists are not in yet" http.body &&
	test "$(metric iot_operator_ready)" = 0 &&
	touch "$STAGE_LOG/go" &&
	test_wait_for 5 ready &&
	test_wait_for 5 metric_is "rest_client_requests_total{code=\"200\",method=\"GET\"}" 5 &&
	test "$(metric "workqueue_depth{name=\"iotservice\"}")" = 7 &&
	test "$(metric "controller_runtime_reconcile_total{controller=\"iotservice\",result=\"success\"}")" = 2 &&
	test "$(metric "leader_election_master_status{name=\"iot-operator-lock\"}")" = 1 &&
	test "$(metric "iot_operator_stage_restarts_total{stage=\"kapply\"}")" = 0 &&
	grep "^# TYPE workqueue_depth gauge" http.body &&
	grep "^# TYPE rest_client_requests_total counter" http.body &&
	grep "^process_resident_memory_bytes [1-9]" http.body &&
	grep "^iot_operator_stage_resident_memory_bytes{stage=\"kstatus\"} [1-9]" http.body &&
	get /nope && test "$(cat http.code)" = 404
'

test_expect_success 'a stage that dies restarts the pipeline with backoff, counted in /metrics' '
	test_when_finished sup_stop &&
	STAGE_MODE=crash sup_start &&
	test_wait_for 15 kapply_starts_at_least 3 &&
	awk "NR > 1 { print \$1 - prev } { prev = \$1 }" "$STAGE_LOG/kapply.starts" >gaps &&
	cat gaps &&
	awk "NR == 1 && \$1 < 0.95 { exit 1 } NR == 2 && \$1 < 1.9 { exit 1 }" gaps &&
	test "$(metric "iot_operator_stage_restarts_total{stage=\"kapply\"}")" -ge 2 &&
	test "$(metric "iot_operator_stage_restarts_total{stage=\"kwatch\"}")" = 0 &&
	grep "stage .kapply. exited with code 111; restarting the pipeline" sup.err &&
	# (waited for: a stand-in kwatch torn down with its pipeline before it
	# wrote its stats line, as under load, adds nothing; each later start
	# adds at least kapply'"'"'s 2)
	test_wait_for 20 metric_at_least "rest_client_requests_total{code=\"200\",method=\"GET\"}" 10
'

test_expect_success 'a stage killed is blamed, not the next one, which ends cleanly on its input'"'"'s end first' '
	test_when_finished sup_stop &&
	STAGE_MODE=killed sup_start &&
	test_wait_for 10 grep -q "restarting the pipeline" sup.err &&
	grep -m 1 "restarting the pipeline" sup.err >first &&
	grep "stage .ireconcile. was killed by signal 9 (Killed); restarting the pipeline" first &&
	grep kapply-eof "$STAGE_LOG/events" &&
	test "$(metric "iot_operator_stage_restarts_total{stage=\"kapply\"}")" = 0
'

test_expect_success 'SIGTERM drains: kwatch first, the writers finish on EOF, exit 0' '
	sup_start &&
	test_wait_for 10 ready &&
	kill -TERM "$(cat sup.pid)" &&
	test_wait_for 10 test -f sup.code &&
	test "$(cat sup.code)" = 0 &&
	head -n 1 "$STAGE_LOG/events" >first &&
	echo kwatch-term >expect && test_cmp expect first &&
	grep ireconcile-eof "$STAGE_LOG/events" &&
	grep kapply-eof "$STAGE_LOG/events" &&
	grep kstatus-eof "$STAGE_LOG/events" &&
	test_no_sanitizer_report sup.err
'

test_expect_success 'SIGTERM: a stage that does not finish is killed at the drain bound (exit 111)' '
	STAGE_MODE=stubborn sup_start --drain-timeout 1s &&
	test_wait_for 10 ready &&
	kill -TERM "$(cat sup.pid)" &&
	test_wait_for 8 test -f sup.code &&
	test "$(cat sup.code)" = 111 &&
	grep "still running at the bound" sup.err
'

# VmRSS/VmHWM of the supervisor, in KB
sup_mem () {
	awk -v f="$1:" '$1 == f { print $2 }' "/proc/$(cat sup.pid)/status"
}

test_expect_success 'kwatch faster than ireconcile: what waits for ireconcile stays bounded, nothing kept after it is passed on' '
	test_when_finished sup_stop &&
	KWATCH_WAIT=1 STAGE_MODE=flood sup_start &&
	test_wait_for 10 test -s "$STAGE_LOG/kwatch.pid" &&
	base=$(sup_mem VmRSS) &&
	touch "$STAGE_LOG/go" &&
	test_wait_for 60 test -e "$STAGE_LOG/flood.done" &&
	peak=$(sup_mem VmHWM) &&
	say "40 MB passed on: VmRSS $base KB before, VmHWM $peak KB after" &&
	test $((peak - base)) -lt 12288 &&
	sup_stop &&
	echo 0 >expect &&
	test_cmp expect sup.code
'

test_expect_success 'an orphaned grandchild is adopted and reaped' '
	test_when_finished sup_stop &&
	STAGE_MODE=orphan sup_start &&
	test_wait_for 10 test -s "$STAGE_LOG/orphan.pid" &&
	orphan=$(cat "$STAGE_LOG/orphan.pid") &&
	ps -o ppid= -p "$orphan" >ppid &&
	test "$(tr -d " " <ppid)" = "$(cat sup.pid)" &&
	test_wait_for 6 eval "! ps -p $orphan" &&
	test_no_sanitizer_report sup.err
'

test_done
