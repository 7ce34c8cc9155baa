#!/bin/sh
test_description='end to end under deploy/ RBAC: two operator replicas, one leader, failover when it is killed'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

e2e_ksim_start

# Short lease timings (lease > renew deadline > 1.2 x retry period).
LEASE="--lease-duration 4s --renew-deadline 3s --retry-period 1s"

holder () {
	k get lease -n $O iot-operator-lock -o jsonpath="{.spec.holderIdentity}" >holder.out &&
	cat holder.out
}

# master NAME: NAME's leader_election_master_status
master () {
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" $1.err | head -n 1) &&
	curl -sS -m 5 -o $1.metrics "http://127.0.0.1:$port/metrics" &&
	sed -n "s/^leader_election_master_status{name=\"iot-operator-lock\"} //p" $1.metrics
}

test_expect_success 'setup: deploy/, two replicas a and b' '
	e2e_install &&
	e2e_operator_start a $LEASE &&
	test_wait_for 10 grep -q "became leader" a.err &&
	e2e_operator_start b $LEASE &&
	test_wait_for 10 grep -q "\"port\":" b.err
'

test_expect_success 'one leader: a holds the lease and runs the pipeline, b waits' '
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	test_wait_for 30 status_is Available &&
	holder >h && grep "^a_" h &&
	test "$(master a)" = 1 &&
	test "$(master b)" = 0 &&
	! grep "became leader" b.err &&
	e2e_stage_pid a kapply >/dev/null &&
	test_must_fail e2e_stage_pid b kwatch &&
	test_must_fail e2e_stage_pid b kapply
'

test_expect_success 'a killed (-9): its stages die with it, b takes over and reconciles' '
	for s in kwatch ireconcile kapply kstatus; do
		e2e_stage_pid a $s >>a.stages || return 1
	done &&
	kill -KILL "$(cat a.pid)" &&
	test_wait_for 5 test -f a.code &&
	rm -f a.pid &&
	for p in $(cat a.stages); do
		test_wait_for 5 eval "! kill -0 $p 2>/dev/null" || return 1
	done &&
	date +%s >killed.at &&
	test_wait_for 15 grep -q "became leader" b.err &&
	took=$(( $(date +%s) - $(cat killed.at) )) &&
	say "b became leader ${took}s after a was killed" &&
	holder >h && grep "^b_" h &&
	test "$(master b)" = 1 &&
	k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"cockpit\":{\"size\":2}}}" >patch.out &&
	cockpit_two () {
		ksim_curl -o cockpit.json "/apis/apps/v1/namespaces/$I/deployments/cockpit-$X" &&
		jq -e ".spec.replicas == 2" cockpit.json
	} &&
	test_wait_for 30 cockpit_two &&
	test_wait_for 30 status_is Available &&
	jq -e ".status.observedGeneration == 2" iot.json
'

test_expect_success 'a back as standby; b stopped with SIGTERM releases the lease, a takes over at once' '
	e2e_operator_start a2 $LEASE &&
	test_wait_for 10 grep -q "\"port\":" a2.err &&
	sleep 2 &&
	! grep "became leader" a2.err &&
	e2e_operator_stop b &&
	test_wait_for 5 grep -q "became leader" a2.err &&
	holder >h && grep "^a2_" h &&
	test_wait_for 10 steady_state &&
	e2e_operator_stop a2 &&
	! grep -i forbidden a.err b.err a2.err &&
	ksim_stop
'

test_done
