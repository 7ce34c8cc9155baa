#!/bin/sh
test_description='the operator under the deploy ServiceAccount with RBAC enforced (ksim): example to Available, deletion, lease'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

for t in ksim kwatch ireconcile kapply kstatus; do
	test -x "$KOP_BIN/$t" || test_skip_all "no $t yet"
done
test_kubectl
"$KOP_BIN/ksim" --help 2>&1 | grep -q -e "--sa-token" || test_skip_all 'ksim without --sa-token'

k () {
	timeout 30 "$KUBECTL" "$@"
}

# TLS: kubectl sends a bearer token over HTTPS only.
ksim_start --tls --authorization rbac --token admin-token --sa-token devawsk8s/iot-operator=operator-token

# ksim's RBAC is young: without it working for the admin, there is nothing to prove.
ksim_curl -s -o /dev/null -w "%{http_code}" /apis >probe.code
test "$(cat probe.code)" = 200 || test_skip_all "ksim --authorization rbac does not serve the admin yet"

# The operator's credentials: the ServiceAccount of deploy/, nothing more.
jq ".users[0].user = {token: \"operator-token\"}" "$KUBECONFIG" >op.kubeconfig || exit 1

phase () {
	k get iot -n devawsk8s example-iotservice -o jsonpath="{.status.phase}" >phase.out 2>/dev/null &&
	test "$(cat phase.out)" = "$1"
}

stop () {
	test -f sup.code && return 0
	kill -TERM "$(cat sup.pid)"
	test_wait_for 20 test -f sup.code || kill -9 "$(cat sup.pid)"
}

test_expect_success 'setup: kubectl apply -k deploy/ as the admin' '
	k apply -k "$PROJECT_ROOT/deploy" >out &&
	k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s
'

test_expect_success 'RBAC is enforced: the ServiceAccount may not read ConfigMaps' '
	test_must_fail k --kubeconfig op.kubeconfig get configmaps -A 2>err &&
	grep -i forbidden err
'

test_expect_success 'the operator under the ServiceAccount: leader, example Available, no 403' '
	test_when_finished stop &&
	{ (
		OPERATOR_NAME=devawsk8s POD_NAME=op-0 iot-operator --kubeconfig op.kubeconfig \
			--metrics-addr 127.0.0.1:0 2>sup.err &
		echo $! >sup.pid
		wait $!
		echo $? >sup.code.tmp && mv sup.code.tmp sup.code
	) & } &&
	test_wait_for 20 grep -q "became leader" sup.err &&
	test_wait_for 20 grep -q "initial lists are in" sup.err &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" &&
	test_wait_for 90 phase Available &&
	k get lease -n devawsk8s iot-operator-lock -o jsonpath="{.spec.holderIdentity}" >holder &&
	grep "^op-0_" holder &&
	k delete iot -n devawsk8s example-iotservice --wait=false &&
	test_wait_for 60 eval "! k get iot -n devawsk8s example-iotservice" &&
	test_wait_for 30 eval "! k get ns devawsk8s-example-iotservice" &&
	kill -TERM "$(cat sup.pid)" &&
	test_wait_for 20 test -f sup.code &&
	test "$(cat sup.code)" = 0 &&
	k get lease -n devawsk8s iot-operator-lock -o jsonpath="{.spec.holderIdentity}" >holder &&
	test ! -s holder &&
	! grep -i "forbidden" sup.err &&
	! grep "restarting the pipeline" sup.err &&
	test_no_sanitizer_report sup.err
'

test_done
