#!/bin/sh
test_description='ksim --authorization rbac: tokens to users, groups and ServiceAccounts; Roles and bindings enforced per verb, resource, subresource and name'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t0705-ksim-rbac"
REC="$TEST_DATA/recordings/errors"

ksim_start --tls --authorization rbac --token admin-token --token-file "$F/tokens.csv" \
	--sa-token devawsk8s/iot-operator=operator-token --no-simulate



test_expect_success 'setup as the admin (system:masters): namespaces, roles, bindings, the deploy/ RBAC' '
	kubectl apply -f "$F/rbac.yaml" >out &&
	kubectl apply -f "$PROJECT_ROOT/deploy/namespace.yaml" -f "$PROJECT_ROOT/deploy/serviceaccount.yaml" \
		-f "$PROJECT_ROOT/deploy/clusterrole.yaml" -f "$PROJECT_ROOT/deploy/clusterrolebinding.yaml" \
		-f "$PROJECT_ROOT/deploy/instance-clusterrole.yaml" -f "$PROJECT_ROOT/deploy/role.yaml" \
		-f "$PROJECT_ROOT/deploy/crd.yaml" >out &&
	kubectl -n team create configmap c1 --from-literal=a=1 >out &&
	kubectl -n team create secret generic only-this --from-literal=a=1 >out &&
	kubectl -n team create secret generic other --from-literal=a=1 >out
'

test_expect_success 'an unknown token is 401; no token is system:anonymous, 403' '
	ksim_expect_code 401 nobody-token GET /api/v1/namespaces &&
	jq -e ".kind == \"Status\" and .code == 401 and .reason == \"Unauthorized\"" body.json &&
	curl -k -sS -m 10 -o body.json "$KSIM_URL/api/v1/namespaces" &&
	sed -n "\$p" "$REC/401-or-403-anonymous.http.txt" | jq -S . >expect &&
	jq -S . body.json >actual &&
	test_cmp expect actual
'

test_expect_success 'the 403 is worded as kube-apiserver words it' '
	ksim_expect_code 403 bob-token GET /api/v1/namespaces/rec-cr/secrets &&
	sed -n "\$p" "$REC/403-forbidden.http.txt" | jq -S . >expect &&
	jq -S . body.json >actual &&
	test_cmp expect actual
'

test_expect_success 'a Role bound to a User: exactly its verbs, in its namespace only' '
	C=/api/v1/namespaces/team/configmaps &&
	ksim_expect_code 200 alice-token GET $C/c1 &&
	ksim_expect_code 200 alice-token GET $C &&
	ksim_expect_code 200 alice-token GET "$C?watch=true&timeoutSeconds=1" &&
	ksim_expect_code 403 alice-token POST $C "{\"metadata\":{\"name\":\"c2\"}}" &&
	jq -e ".message == \"configmaps is forbidden: User \\\"alice\\\" cannot create resource \\\"configmaps\\\" in API group \\\"\\\" in the namespace \\\"team\\\"\"" body.json &&
	ksim_expect_code 403 alice-token PUT $C/c1 "{\"metadata\":{\"name\":\"c1\"}}" &&
	ksim_expect_code 403 alice-token PATCH $C/c1 "{}" application/merge-patch+json &&
	ksim_expect_code 403 alice-token DELETE $C/c1 &&
	jq -e ".details == {name: \"c1\", kind: \"configmaps\"}" body.json &&
	ksim_expect_code 403 alice-token DELETE $C &&
	ksim_expect_code 403 alice-token GET /api/v1/namespaces/default/configmaps &&
	ksim_expect_code 403 alice-token GET /api/v1/configmaps &&
	jq -e ".message | endswith(\"at the cluster scope\")" body.json
'

test_expect_success 'resourceNames: only the named object, and not for list' '
	S=/api/v1/namespaces/team/secrets &&
	ksim_expect_code 200 alice-token GET $S/only-this &&
	ksim_expect_code 403 alice-token GET $S/other &&
	jq -e ".message == \"secrets \\\"other\\\" is forbidden: User \\\"alice\\\" cannot get resource \\\"secrets\\\" in API group \\\"\\\" in the namespace \\\"team\\\"\"" body.json &&
	ksim_expect_code 403 alice-token GET $S &&
	ksim_expect_code 403 alice-token DELETE $S/only-this
'

test_expect_success 'a ClusterRoleBinding to a Group with wildcards: every verb on apps, in every namespace' '
	D=/apis/apps/v1/namespaces/team/deployments &&
	body="{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d1\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}" &&
	ksim_expect_code 201 carol-token POST $D "$body" &&
	ksim_expect_code 200 alice-token GET /apis/apps/v1/deployments &&
	ksim_expect_code 200 alice-token PATCH $D/d1 "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}" application/merge-patch+json &&
	ksim_expect_code 200 alice-token GET $D/d1/status &&
	ksim_expect_code 403 bob-token PATCH $D/d1 "{\"metadata\":{\"labels\":{\"x\":\"z\"}}}" application/merge-patch+json &&
	ksim_expect_code 403 bob-token GET /apis/apps/v1/namespaces/default/deployments
'

test_expect_success 'subresources: deployments/status is not deployments; a "*" resource covers subresources too' '
	D=/apis/apps/v1/namespaces/team/deployments &&
	ksim_expect_code 200 bob-token PATCH $D/d1/status "{\"status\":{\"replicas\":0}}" application/merge-patch+json &&
	ksim_expect_code 403 bob-token GET $D/d1 &&
	jq -e ".message == \"deployments.apps \\\"d1\\\" is forbidden: User \\\"iot-op\\\" cannot get resource \\\"deployments\\\" in API group \\\"apps\\\" in the namespace \\\"team\\\"\"" body.json &&
	ksim_expect_code 200 bob-token GET /api/v1/namespaces/team/configmaps/c1 &&
	ksim_expect_code 403 bob-token GET /api/v1/namespaces/team/configmaps &&
	ksim_expect_code 404 bob-token GET /api/v1/namespaces/team/pods/x/status &&
	ksim_expect_code 403 bob-token GET /api/v1/namespaces/rec-cr/configmaps/c1
'

test_expect_success 'the operator ServiceAccount (--sa-token) gets what deploy/ grants (clusterrole.yaml, role.yaml), nothing more' '
	T=operator-token &&
	ksim_expect_code 200 $T GET /apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices &&
	ksim_expect_code 200 $T GET "/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices?watch=true&timeoutSeconds=1" &&
	ksim_expect_code 403 $T GET /apis/cp.iot.sap/v1/iotservices &&
	ksim_expect_code 200 $T GET /api/v1/pods &&
	ksim_expect_code 200 $T GET /apis/apps/v1/deployments &&
	ksim_expect_code 403 $T GET /api/v1/namespaces/team/pods/x &&
	jq -e ".message | startswith(\"pods \\\"x\\\" is forbidden: User \\\"system:serviceaccount:devawsk8s:iot-operator\\\" cannot get resource \\\"pods\\\"\")" body.json &&
	ksim_expect_code 403 $T GET /apis/apps/v1/namespaces/team/deployments/nope &&
	ksim_expect_code 403 $T DELETE /apis/apps/v1/namespaces/team/statefulsets/nope &&
	ksim_expect_code 404 $T DELETE /api/v1/namespaces/nope &&
	ksim_expect_code 403 $T PUT /apis/apps/v1/namespaces/team/deployments/d1 "{}" &&
	ksim_expect_code 403 $T GET /api/v1/namespaces/team/configmaps &&
	ksim_expect_code 403 $T DELETE /api/v1/namespaces/team/secrets &&
	ksim_expect_code 200 $T GET /apis &&
	kubectl --token operator-token get configmaps -n devawsk8s >out 2>err;
	grep "Error from server (Forbidden): configmaps is forbidden: User \"system:serviceaccount:devawsk8s:iot-operator\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"devawsk8s\"" err &&
	test_must_fail kubectl --token operator-token get secrets -n team >out 2>err &&
	grep -x "Error from server (Forbidden): secrets is forbidden: User \"system:serviceaccount:devawsk8s:iot-operator\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\"" err &&
	ksim_expect_code 200 $T GET "/api/v1/namespaces/devawsk8s/secrets?fieldSelector=metadata.name%3Dimage-pull-secret" &&
	ksim_expect_code 200 $T GET "/api/v1/namespaces/devawsk8s/secrets?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dimage-pull-secret" &&
	ksim_expect_code 403 $T GET "/api/v1/namespaces/devawsk8s/secrets?fieldSelector=metadata.name%3Dother" &&
	jq -e ".message | startswith(\"secrets \\\"other\\\" is forbidden: User \\\"system:serviceaccount:devawsk8s:iot-operator\\\" cannot list resource \\\"secrets\\\"\")" body.json &&
	ksim_expect_code 403 $T GET "/api/v1/namespaces/devawsk8s/secrets?fieldSelector=metadata.name%3Dimage-pull-secret,type%3Dx"
'

test_expect_success 'bindings take effect at once: a new RoleBinding allows, deleting it denies again' '
	ksim_expect_code 403 bob-token GET /api/v1/namespaces/rec-cr/secrets &&
	cat >tmp.yaml <<-\EOT &&
	apiVersion: rbac.authorization.k8s.io/v1
	kind: RoleBinding
	metadata: {name: tmp, namespace: rec-cr}
	roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
	subjects: [{kind: User, name: iot-op, apiGroup: rbac.authorization.k8s.io}]
	EOT
	kubectl apply -f tmp.yaml >out &&
	ksim_expect_code 200 bob-token GET /api/v1/namespaces/rec-cr/secrets &&
	kubectl -n rec-cr delete rolebinding tmp >out &&
	ksim_expect_code 403 bob-token GET /api/v1/namespaces/rec-cr/secrets &&
	ksim_stop
'

test_done
