#!/bin/sh
test_description='end to end under deploy/ RBAC: ksim (--data) restarted mid-watch and mid-rollout, the operator resumes'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

DATA=$TRASH/data
e2e_ksim_start --data "$DATA" --pod-start-delay 1s
PORT=${KSIM_URL##*:}

test_expect_success 'setup: deploy/, the operator, the example Available' '
	e2e_install &&
	e2e_operator_start op &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	test_wait_for 30 status_is Available &&
	test_wait_for 10 steady_state &&
	iot_get && jq -r .metadata.resourceVersion iot.json >rv.before
'

test_expect_success 'an edit rolls out; ksim stops in the middle of it' '
	k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"gateway\":{\"mqtt\":{\"image\":\"registry.example/gateway-mqtt:2\"}}}}" >patch.out &&
	test_wait_for 10 status_is Processing &&
	ksim_stop
'

# The same port and data: objects, resourceVersions and the watch history
# are back, so the watches resume where they were. (A ksim that did not stop
# above would hold the port: it goes first.)
test -f "$TRASH/ksim.rc" || kill -KILL "$KSIM_PID" 2>/dev/null
e2e_ksim_start --data "$DATA" --pod-start-delay 1s --port "$PORT"

test_expect_success 'ksim is back with the same state and port' '
	test "${KSIM_URL##*:}" = "$PORT" &&
	iot_get &&
	test "$(jq -r .metadata.generation iot.json)" = 2 &&
	jq -r .metadata.resourceVersion iot.json >rv.after &&
	test "$(cat rv.after)" -gt "$(cat rv.before)"
'

test_expect_success 'the operator resumes: the rollout finishes, Available, no pipeline restart' '
	mqtt_rolled () {
		ksim_curl -o mqtt.json "/apis/apps/v1/namespaces/$I/statefulsets/gateway-mqtt-$X" &&
		jq -e ".spec.template.spec.containers[0].image == \"registry.example/gateway-mqtt:2\" and
			.status.readyReplicas == 1 and .status.currentRevision == .status.updateRevision" mqtt.json
	} &&
	test_wait_for 30 status_is Available &&
	jq -e ".status.observedGeneration == 2" iot.json &&
	mqtt_rolled &&
	! grep "restarting the pipeline" op.err
'

test_expect_success 'live after the restart: a new edit and a drift are handled' '
	k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"cockpit\":{\"size\":2}}}" >patch.out &&
	k delete service -n $I cockpit-$X --wait=false >del.out &&
	svc_back () { ksim_curl -o svc.json /api/v1/namespaces/$I/services/cockpit-$X && jq -e ".spec.ports[0].port == 8080" svc.json; } &&
	test_wait_for 30 svc_back &&
	test_wait_for 30 status_is Available &&
	jq -e ".status.observedGeneration == 3 and (.status.pods | length) == 9" iot.json &&
	test_wait_for 10 steady_state &&
	! grep -i forbidden op.err &&
	e2e_operator_stop op &&
	ksim_stop
'

test_done
