#!/bin/sh
test_description='end to end under deploy/ RBAC: each stage killed mid-rollout, the same final state'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

# Pods take a second to start: a rollout is still going when a stage dies.
e2e_ksim_start --pod-start-delay 1s

test_expect_success 'setup: deploy/, the operator, the example Available' '
	e2e_install &&
	e2e_operator_start op &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	test_wait_for 30 status_is Available
'

# rolled N: the images of generation N's edit are in their workloads, ready
rolled () {
	ksim_curl -o cockpit.json "/apis/apps/v1/namespaces/$I/deployments/cockpit-$X" &&
	ksim_curl -o mqtt.json "/apis/apps/v1/namespaces/$I/statefulsets/gateway-mqtt-$X" &&
	jq -e ".spec.template.spec.containers[0].image == \"registry.example/cockpit:$1\" and
		.status.updatedReplicas == 1 and .status.readyReplicas == 1 and .status.replicas == 1" cockpit.json &&
	jq -e ".spec.template.spec.containers[0].image == \"registry.example/gateway-mqtt:$1\" and
		.status.readyReplicas == 1 and .status.currentRevision == .status.updateRevision" mqtt.json
}

gen=1
for stage in kwatch ireconcile kapply kstatus; do
	gen=$((gen + 1))
	test_expect_success "$stage killed (-9) while generation $gen rolls out: restarted, the same final state" '
		k patch iotservice -n $O $X --type merge \
			-p "{\"spec\":{\"cockpit\":{\"image\":\"registry.example/cockpit:$gen\"},\"gateway\":{\"mqtt\":{\"image\":\"registry.example/gateway-mqtt:$gen\"}}}}" >patch.out &&
		test_wait_for 10 status_is Processing &&
		test "$(jq .status.observedGeneration iot.json)" = $gen &&
		pid=$(e2e_stage_pid op $stage) &&
		kill -KILL $pid &&
		# (when another stage is blamed, the supervisor'"'"'s lines say which: shown on failure)
		{ test_wait_for 10 grep -q "stage .$stage. .*; restarting the pipeline" op.err ||
			{ grep -E "restarting the pipeline|\"stage\"|pipeline started" op.err | tail -n 20; false; }; } &&
		test_wait_for 40 status_is Available &&
		test "$(jq .status.observedGeneration iot.json)" = $gen &&
		rolled $gen &&
		children_there &&
		test_wait_for 10 steady_state
	'
done

test_expect_success 'four restarts counted, one per stage; no 403; a clean stop' '
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" op.err | head -n 1) &&
	curl -sS -m 5 -o metrics "http://127.0.0.1:$port/metrics" &&
	grep "^iot_operator_stage_restarts_total" metrics | sort >actual &&
	cat >expect <<-EOF &&
	iot_operator_stage_restarts_total{stage="ireconcile"} 1
	iot_operator_stage_restarts_total{stage="kapply"} 1
	iot_operator_stage_restarts_total{stage="kstatus"} 1
	iot_operator_stage_restarts_total{stage="kwatch"} 1
	EOF
	test_cmp expect actual &&
	! grep -i forbidden op.err &&
	e2e_operator_stop op &&
	ksim_stop
'

test_done
