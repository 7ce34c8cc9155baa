#!/bin/sh
test_description='deploy/ RBAC with kubectl as on a cluster: kubectl auth can-i --as the operator ServiceAccount (ksim --authorization rbac, impersonation) says yes to what the stages do, no to more; deploy-sharded/ adds the Leases of O only'
. "${0%/*}/test-lib.sh"
test_normal_pass_only 'it checks deploy/'\''s RBAC as kubectl sees it; ksim'\''s authorizer runs sanitized under t0705 and t5011'
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t5008-deploy-rbac"
test_kubectl

# TLS: kubectl sends a bearer token over HTTPS only. The ServiceAccount's own token as well, to
# compare what impersonation answers with what the real credentials get.
ksim_start --tls --authorization rbac --token admin-token --sa-token devawsk8s/iot-operator=operator-token \
	--no-simulate

SA=system:serviceaccount:devawsk8s:iot-operator

k () {
	timeout 30 "$KUBECTL" "$@"
}

test_expect_success 'setup: kubectl apply -k deploy/ as the admin' '
	k apply -k "$PROJECT_ROOT/deploy" >out &&
	k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s >out &&
	jq ".users[0].user = {token: \"operator-token\"}" "$KUBECONFIG" >op.kubeconfig
'

# What the operator makes first for an instance: its namespace, then the RoleBinding that grants it
# its rights there (pipeline/iotservice/rbac.jq), as the ServiceAccount itself.
test_expect_success 'setup: the ServiceAccount makes the instance namespace and binds iot-operator-instance there' '
	cat >instance.yaml <<-EOF &&
	apiVersion: v1
	kind: Namespace
	metadata:
	  name: devawsk8s-example-iotservice
	  labels: {app.kubernetes.io/managed-by: iot-operator, cp.iot.sap/operator: devawsk8s}
	---
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata:
	  name: iot-operator-instance
	  namespace: devawsk8s-example-iotservice
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: iot-operator-instance}
	subjects:
	- {kind: ServiceAccount, name: iot-operator, namespace: devawsk8s}
	EOF
	k --kubeconfig op.kubeconfig apply --server-side --field-manager iot-operator -f instance.yaml >out
'

# can_i FILE: each line of FILE, WANT VERB RESOURCE [FLAGS], is what kubectl auth can-i answers, --as
# the ServiceAccount and with its own token
can_i () {
	grep -v -e "^#" -e "^\$" "$1" >checks &&
	while read -r want args; do
		as=$(k auth can-i $args --as=$SA 2>err) ;
		own=$(k --kubeconfig op.kubeconfig auth can-i $args 2>>err) ;
		if test "$as" != "$want" || test "$own" != "$want"; then
			echo "can-i $args: want $want, got $as (--as), $own (its token)" && cat err && return 1
		fi
	done <checks
}

test_expect_success 'auth can-i --as the ServiceAccount, and with its own token: yes to what the stages do, no to more' '
	can_i "$F/can-i.txt" &&
	test "$(wc -l <checks)" -gt 50
'

test_expect_success 'kubectl --as the ServiceAccount: get what it may, Forbidden for the rest, as its token gets' '
	k get pods -A --as=$SA >out 2>err &&
	k get iotservices -n devawsk8s --as=$SA >out 2>err &&
	test_must_fail k get configmaps -n devawsk8s --as=$SA 2>err &&
	grep -F "Error from server (Forbidden): configmaps is forbidden: User \"$SA\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"devawsk8s\"" err &&
	test_must_fail k --kubeconfig op.kubeconfig get configmaps -n devawsk8s 2>err.own &&
	test_cmp err err.own &&
	k auth can-i --list -n devawsk8s --as=$SA >list &&
	k --kubeconfig op.kubeconfig auth can-i --list -n devawsk8s >list.own &&
	test_cmp list list.own &&
	grep -E "^leases\.coordination\.k8s\.io +\[\] +\[iot-operator-lock\] +\[get update\]$" list &&
	grep -E "^iotservices\.cp\.iot\.sap/status +\[\] +\[\] +\[get update patch\]$" list
'

test_expect_success 'the ServiceAccount may not impersonate (no way around its role)' '
	test_must_fail k --kubeconfig op.kubeconfig get secrets -n kube-system --as=system:admin --as-group=system:masters 2>err &&
	grep -F "Error from server (Forbidden): users \"system:admin\" is forbidden: User \"$SA\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope" err
'

# Sharded (docs/sharding.md): the Role iot-operator-shards adds the Leases of O, nothing elsewhere.
test_expect_success 'deploy-sharded/ applied: the Leases of sharding in O, none elsewhere (can-i, can-i --list)' '
	k apply -k "$PROJECT_ROOT/deploy-sharded" >out &&
	grep -x "role.rbac.authorization.k8s.io/iot-operator-shards created" out &&
	can_i "$F/can-i-sharded.txt" &&
	test "$(wc -l <checks)" -gt 15 &&
	k auth can-i --list -n devawsk8s --as=$SA >list &&
	grep -E "^leases\.coordination\.k8s\.io +\[\] +\[\] +\[create get list update delete\]$" list &&
	sed -n "s/^leases\.coordination\.k8s\.io  *\[\]  *\[\(iot-operator-shard-[0-9]*\)\]  *\[get update\]$/\1/p" list >shard-names &&
	for i in 00 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15; do echo iot-operator-shard-$i; done >expect &&
	test_cmp expect shard-names &&
	k auth can-i --list -n kube-system --as=$SA >list.ks &&
	! grep "^leases" list.ks
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
