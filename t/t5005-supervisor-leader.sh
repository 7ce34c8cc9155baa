#!/bin/sh
test_description='iot-operator leader election on ksim: one leader, failover after kill -9, release on SIGTERM, stop before expiry'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

# The stand-in stages of t5002; the lease is real (ksim). Short timings:
# lease 8 s, renew deadline 6 s, retry period 1 s.
STAGES="$TEST_DIRECTORY/t5002-supervisor-stages"
STAGE_FIXTURES="$STAGES"
export STAGE_FIXTURES
mkdir prog

ksim_start
ksim_curl -s -o ns.out -X POST -H "Content-Type: application/json" \
	-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"o\"}}" /api/v1/namespaces

# sup_start NAME: a replica with POD_NAME=NAME; files NAME.err, NAME.pid,
# NAME.code (its exit code), NAME.port; its stages log to log.NAME/.
sup_start () {
	rm -rf "log.$1" "$1.err" "$1.pid" "$1.code" "$1.port" &&
	mkdir "log.$1" || return 1
	(
		STAGE_LOG="$TRASH/log.$1" POD_NAME=$1 OPERATOR_NAME=o iot-operator --stage-dir "$STAGES" \
			--metrics-addr 127.0.0.1:0 --program "$TRASH/prog" --lease-duration 8s --renew-deadline 6s \
			--retry-period 1s 2>"$1.err" &
		echo $! >"$1.pid"
		wait $!
		echo $? >"$1.code.tmp" && mv "$1.code.tmp" "$1.code"
	) &
	test_wait_for 10 grep -q "\"port\":" "$1.err" &&
	sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" "$1.err" | head -n 1 >"$1.port"
}

sup_kill () {
	test -f "$1.pid" && kill -9 "$(cat "$1.pid")" 2>/dev/null
	test_wait_for 10 test -f "$1.code"
}

# leader_status NAME: leader_election_master_status of that replica
leader_status () {
	curl -s "http://127.0.0.1:$(cat "$1.port")/metrics" >"$1.metrics" &&
	awk "\$1 == \"leader_election_master_status{name=\\\"iot-operator-lock\\\"}\" { print \$2 }" "$1.metrics"
}

is_leader () {
	test "$(leader_status "$1")" = 1
}

holder () {
	ksim_curl -s -o lease.json /apis/coordination.k8s.io/v1/namespaces/o/leases/iot-operator-lock &&
	jq -r .spec.holderIdentity lease.json
}

holder_is () {
	case "$(holder)" in
	"$1"_*) return 0 ;;
	esac
	return 1
}

ready () {
	test "$(curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$(cat "$1.port")/readyz")" = 200
}

gone () {
	! kill -0 "$1" 2>/dev/null
}

test_expect_success 'two replicas: a leads and runs the pipeline, b waits and is ready as a standby' '
	sup_start a &&
	test_wait_for 10 is_leader a &&
	sup_start b &&
	test_wait_for 10 ready b &&
	test_wait_for 10 ready a &&
	sleep 2 &&
	is_leader a && test "$(leader_status b)" = 0 &&
	holder_is a &&
	test -s log.a/kwatch.args && ! test -e log.b/kwatch.args &&
	jq -e ".spec.leaseDurationSeconds == 8 and
		(.spec.renewTime | test(\"^[0-9-]{10}T[0-9:]{8}\\\\.[0-9]{6}Z$\"))" lease.json &&
	grep "waiting for leadership" b.err &&
	! grep "became leader" b.err &&
	grep "^rest_client_requests_total{code=\"200\",method=\"PUT\"} [1-9]" a.metrics
'

test_expect_success 'kill -9 the leader: its stages die with it, b takes over once the lease expired' '
	kwatch_a=$(cat log.a/kwatch.pid) &&
	transitions=$(jq .spec.leaseTransitions lease.json) &&
	start=$(date +%s) &&
	sup_kill a &&
	test_wait_for 5 gone "$kwatch_a" &&
	test_wait_for 20 is_leader b &&
	took=$(( $(date +%s) - start )) &&
	echo "took over after ${took}s" &&
	test "$took" -ge 5 && test "$took" -le 16 &&
	holder_is b &&
	test "$(jq .spec.leaseTransitions lease.json)" = $((transitions + 1)) &&
	test_wait_for 10 test -s log.b/kwatch.args
'

test_expect_success 'SIGTERM releases the lease: the standby takes over at once' '
	sup_start a &&
	test_wait_for 10 ready a &&
	test "$(leader_status a)" = 0 &&
	start=$(date +%s) &&
	kill -TERM "$(cat b.pid)" &&
	test_wait_for 15 test -f b.code &&
	test "$(cat b.code)" = 0 &&
	grep "released the lease" b.err &&
	test_wait_for 8 is_leader a &&
	took=$(( $(date +%s) - start )) &&
	echo "took over after ${took}s" &&
	test "$took" -le 4 &&
	holder_is a &&
	test_no_sanitizer_report b.err
'

test_expect_success 'a leader that cannot renew stops its pipeline before the lease can expire' '
	test_wait_for 10 test -s log.a/kwatch.pid &&
	kwatch_a=$(cat log.a/kwatch.pid) &&
	start=$(date +%s) &&
	kill -STOP "$KSIM_PID" &&
	test_when_finished "kill -CONT $KSIM_PID" &&
	test_wait_for 10 gone "$kwatch_a" &&
	took=$(( $(date +%s) - start )) &&
	echo "pipeline stopped after ${took}s" &&
	test "$took" -lt 8 &&
	grep "stopping the pipeline before the lease can expire" a.err &&
	test "$(leader_status a)" = 0
'

test_expect_success 'once the API server answers again, the lease is taken back' '
	test_wait_for 15 is_leader a &&
	test_wait_for 10 test -s log.a/kwatch.pid &&
	kill -TERM "$(cat a.pid)" &&
	test_wait_for 15 test -f a.code &&
	test_no_sanitizer_report a.err
'

# A replica that cannot reach the API server says so once per failure (not
# once for ever): connection refused, then a server that answers in TLS; and
# it is not ready, since it could not take over.
test_expect_success 'lease failures: each new one logged at once, the same one not every retry; not ready' '
	{ ksim --port 0 --kubeconfig free.kc </dev/null >/dev/null 2>free.err 3>&- 4>&- & echo $! >free.pid; } &&
	test_wait_for 10 test -s free.kc &&
	port=$(jq -r ".clusters[0].cluster.server" free.kc | sed "s/.*://") &&
	kill -TERM "$(cat free.pid)" &&
	test_wait_for 10 gone "$(cat free.pid)" &&
	jq ".clusters[0].cluster.server = \"http://127.0.0.1:$port\"" free.kc >dead.kc &&
	{ KUBECONFIG=dead.kc STAGE_LOG="$TRASH" POD_NAME=d OPERATOR_NAME=o iot-operator --stage-dir "$STAGES" \
		--metrics-addr 127.0.0.1:0 --program "$TRASH/prog" --lease-duration 8s --renew-deadline 6s \
		--retry-period 200ms </dev/null >/dev/null 2>d.err 3>&- 4>&- & echo $! >d.pid; } &&
	test_when_finished "kill -KILL \$(cat d.pid) \$(cat tls.pid 2>/dev/null) 2>/dev/null" &&
	test_wait_for 10 grep -q "unable to acquire or renew the lease" d.err &&
	test_wait_for 10 grep -q "\"port\":" d.err &&
	dport=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" d.err | head -n 1) &&
	curl -s -o readyz.out -w "%{http_code}\n" "http://127.0.0.1:$dport/readyz" >readyz.code &&
	echo 503 >expect && test_cmp expect readyz.code &&
	grep "^not ready: a standby that cannot reach the API server could not take over: " readyz.out &&
	curl -s "http://127.0.0.1:$dport/metrics" | grep "^iot_operator_ready 0$" &&
	sleep 2 &&
	test $(grep -c "unable to acquire or renew the lease" d.err) = 1 &&
	{ ksim --tls --port $port </dev/null >/dev/null 2>tls.err 3>&- 4>&- & echo $! >tls.pid; } &&
	failures () { test $(grep -c "unable to acquire or renew the lease" d.err) = $1; } &&
	test_wait_for 10 failures 2 &&
	sleep 2 &&
	failures 2 &&
	jq -e "select(.msg | startswith(\"unable to acquire\")) | .failures > 0" d.err
'

test_done
