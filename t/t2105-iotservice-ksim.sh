#!/bin/sh
test_description='pipeline/iotservice end to end: the operator against ksim (create, steady state, edit, delete)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

for t in ksim kwatch ireconcile kapply kstatus iot-operator
do
	command -v $t >/dev/null || test_skip_all "$t not built"
done

X=example-iotservice
I=devawsk8s-example-iotservice
SEL="cp.iot.sap%2Finstance%3D$X"

ksim_start || exit 1

operator_stop () {
	test -s operator.pid || return 0
	kill -TERM "$(cat operator.pid)" 2>/dev/null
	i=0
	while kill -0 "$(cat operator.pid)" 2>/dev/null && test $i -lt 150; do sleep 0.1; i=$((i + 1)); done
	kill -KILL "$(cat operator.pid)" 2>/dev/null
	rm -f operator.pid
}
trap 'operator_stop; ksim_exit_trap_' EXIT

# count PATH: the number of items a list answers
count () {
	ksim_curl -o list.json "$1" && jq -e ".items | length" list.json
}

test_expect_success 'setup: CRD, operator namespace with its pull secret, the example' '
	kapply -f "$PROJECT_ROOT/deploy/crd.yaml" >crd.out &&
	kapply -f "$PROJECT_ROOT/deploy/namespace.yaml" >ns.out &&
	kapply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	! grep "\"ok\":false" crd.out ns.out example.out
'

test_expect_success 'the operator starts' '
	(OPERATOR_NAME=devawsk8s iot-operator --leader-elect=false --metrics-addr 0 \
		--program "$PROJECT_ROOT/pipeline/iotservice" >operator.out 2>operator.log </dev/null &
	 echo $! >operator.pid) &&
	test -s operator.pid
'

children_there () {
	test "$(count "/api/v1/namespaces?labelSelector=$SEL")" = 1 &&
	test "$(count "/api/v1/namespaces/$I/secrets?labelSelector=$SEL")" = 2 &&
	test "$(count "/api/v1/namespaces/$I/services?labelSelector=$SEL")" = 8 &&
	test "$(count "/apis/apps/v1/namespaces/$I/deployments?labelSelector=$SEL")" = 6 &&
	test "$(count "/apis/apps/v1/namespaces/$I/statefulsets?labelSelector=$SEL")" = 2 &&
	test "$(count "/apis/networking.k8s.io/v1/namespaces/$I/networkpolicies?labelSelector=$SEL")" = 1
}

# status_is PHASE...: the status describes the current generation with one of these phases
status_is () {
	ksim_curl -o iot.json /apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/$X &&
	jq -e ".status.observedGeneration == .metadata.generation and
		any(\$ARGS.positional[]; . == \$phase)" --arg phase "$(jq -r .status.phase iot.json)" --args "$@" <iot.json
}

test_expect_success 'every child is created in O-X, the status says where it is' '
	test_wait_for 60 children_there &&
	test_wait_for 60 status_is Processing Available &&
	jq -c .metadata.finalizers iot.json >actual &&
	echo "[\"com.sap.iotservices/namespace-dropper\"]" >expect &&
	test_cmp expect actual
'

# ksim simulates the controllers and the kubelet: pods start, the
# LoadBalancer gets an ingress, and the instance becomes Available. The pods
# come on a watch of their own: a pod seen Running after the workloads' ready
# statuses joins status.pods at the next status write, up to --status-interval
# (5 s) later, since a longer list says nothing new.
all_pods_listed () {
	status_is Available && test "$(jq ".status.pods | length" iot.json)" = 8
}

test_expect_success 'the children become ready: Available, Running pods listed, conditions' '
	test_wait_for 90 all_pods_listed &&
	jq -c "[(.status.pods | length), (.status.pods == (.status.pods | sort))]" iot.json >actual &&
	echo "[8,true]" >expect && test_cmp expect actual &&
	jq -c "[.status.conditions[] | [.type, .status]]" iot.json >actual &&
	echo "[[\"Available\",\"True\"],[\"Progressing\",\"False\"]]" >expect &&
	test_cmp expect actual &&
	jq -e ".status | has(\"reason\") | not" iot.json
'

test_expect_success 'config.yml in the Secret; its MD5 on every pod template but postgresql' '
	ksim_curl -o secret.json /api/v1/namespaces/$I/secrets/iotservice-$X &&
	jq -r ".data[\"config.yml\"]" secret.json | base64 -d >config.yml &&
	head -n 3 config.yml >actual &&
	printf "name: $X\niotservices:\n  instance_namespace: $I\n" >expect &&
	test_cmp expect actual &&
	sum=$(md5sum <config.yml | cut -d" " -f1) &&
	ksim_curl -o deploys.json "/apis/apps/v1/namespaces/$I/deployments?labelSelector=$SEL" &&
	jq -r ".items[] | \"\(.metadata.name) \(.spec.template.metadata.annotations[\"checksum/config\"] // \"none\")\"" deploys.json | sort >actual &&
	cat >expect <<-EOT &&
	cockpit-$X $sum
	core-spring-$X $sum
	gateway-rest-$X $sum
	haproxy-$X $sum
	postgresql-$X none
	processing-$X $sum
	EOT
	test_cmp expect actual
'

snapshot () {
	kwatch --once "iotservices.cp.iot.sap@devawsk8s" \
		"namespaces:l=app.kubernetes.io/managed-by=iot-operator" \
		"rolebindings.rbac.authorization.k8s.io@*:l=app.kubernetes.io/managed-by=iot-operator" \
		"secrets@~:l=app.kubernetes.io/managed-by=iot-operator" \
		"services@*:l=app.kubernetes.io/managed-by=iot-operator" \
		"deployments.apps@*:l=app.kubernetes.io/managed-by=iot-operator" \
		"statefulsets.apps@*:l=app.kubernetes.io/managed-by=iot-operator" \
		"networkpolicies.networking.k8s.io@*:l=app.kubernetes.io/managed-by=iot-operator" \
		"pods@*:l=app.kubernetes.io/managed-by=iot-operator" \
		"secrets@devawsk8s:f=metadata.name=image-pull-secret" >"$1" 2>"$1.err"
}

# replays_quiet NAME: a snapshot of the cluster (NAME.jsonl) replayed into a
# fresh ireconcile writes nothing (NAME.out): what the server stores is what
# the program wants. A status that only describes (the pods of a rollout's
# end) may follow Available by up to --status-interval (5 s), so a test
# waits for it: test_wait_for 15 replays_quiet NAME.
replays_quiet () {
	snapshot "$1.jsonl" &&
	OPERATOR_NAME=devawsk8s ireconcile "$PROJECT_ROOT/pipeline/iotservice" <"$1.jsonl" >"$1.out" 2>"$1.err" &&
	! test -s "$1.out"
}

test_expect_success 'steady state: what the server stores is what the program wants' '
	test_wait_for 15 replays_quiet steady &&
	test_cmp /dev/null steady.out
'

test_expect_success 'an image edit reaches its Deployment and nothing else, then Available again' '
	ksim_curl -o before.json "/apis/apps/v1/namespaces/$I/deployments/haproxy-$X" &&
	ksim_curl -o patched.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"cockpit\":{\"image\":\"registry.example/cockpit:5\"}}}" \
		/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/$X &&
	cockpit_image () {
		ksim_curl -o cockpit.json "/apis/apps/v1/namespaces/$I/deployments/cockpit-$X" &&
		jq -e ".spec.template.spec.containers[0].image == \"registry.example/cockpit:5\"" cockpit.json
	} &&
	test_wait_for 60 cockpit_image &&
	test_wait_for 90 status_is Available &&
	jq -e ".metadata.generation == 2" iot.json &&
	ksim_curl -o after.json "/apis/apps/v1/namespaces/$I/deployments/haproxy-$X" &&
	jq "[.metadata.generation, .spec]" before.json >expect &&
	jq "[.metadata.generation, .spec]" after.json >actual &&
	test_cmp expect actual
'

# A field the program sets no more is removed (server-side apply of the
# smaller object, because the desired object changed since it was applied).
test_expect_success 'a field no longer set (imagePullSecrets emptied) leaves every workload, then Available' '
	ksim_curl -o patched.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"imagePullSecrets\":\"\"}}" \
		/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/$X &&
	no_pull_secrets () {
		ksim_curl -o deps.json "/apis/apps/v1/namespaces/$I/deployments?labelSelector=$SEL" &&
		ksim_curl -o sts.json "/apis/apps/v1/namespaces/$I/statefulsets?labelSelector=$SEL" &&
		jq -s -e "[.[].items[] | .spec.template.spec | has(\"imagePullSecrets\")] == [false, false, false, false, false, false, false, false]" \
			deps.json sts.json
	} &&
	test_wait_for 60 no_pull_secrets &&
	test_wait_for 90 status_is Available &&
	jq -e ".metadata.generation == 3" iot.json &&
	test_wait_for 15 replays_quiet dropped &&
	test_cmp /dev/null dropped.out
'

test_expect_success 'deleting the IoTService deletes O-X, then the finalizer goes' '
	ksim_curl -o deleted.json -X DELETE /apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/$X &&
	iot_gone () {
		ksim_curl -o gone.json /apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/$X &&
		jq -e ".code == 404" gone.json
	} &&
	test_wait_for 60 iot_gone &&
	ksim_curl -o ns.json /api/v1/namespaces/$I &&
	jq -e ".code == 404 or .status.phase == \"Terminating\"" ns.json &&
	ksim_curl -o opns.json /api/v1/namespaces/devawsk8s &&
	jq -e ".status.phase == \"Active\"" opns.json
'

test_expect_success 'the operator stops cleanly, no sanitizer report' '
	operator_stop &&
	test_no_sanitizer_report operator.log &&
	ksim_stop
'

test_done
