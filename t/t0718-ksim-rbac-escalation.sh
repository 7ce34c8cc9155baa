#!/bin/sh
test_description='ksim --authorization rbac: the escalation rules of RBAC (a Role or a binding with rights its writer lacks is refused unless it may escalate or bind), worded as kube-apiserver words them'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t0718-ksim-rbac-escalation"
RB=/apis/rbac.authorization.k8s.io/v1

ksim_start --authorization rbac --token admin-token --token-file "$F/tokens.csv" --no-simulate



role () {
	printf '{"metadata":{"name":"%s"},"rules":%s}' "$1" "$2"
}
binding () {
	printf '{"metadata":{"name":"%s"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"%s","name":"%s"},"subjects":[{"kind":"User","name":"someone"}]}' "$1" "$2" "$3"
}

test_expect_success 'setup as the admin (system:masters): the namespace, roles and bindings' '
	kubectl apply -f "$F/rbac.yaml" >out
'

test_expect_success 'a Role with rights its writer holds is created' '
	ksim_expect_code 201 dave-token POST $RB/namespaces/esc/roles \
		"$(role r1 "[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\"]}]")"
'

test_expect_success 'a Role with rights its writer lacks: 403, the missing rights listed as kube-apiserver lists them' '
	ksim_expect_code 403 dave-token POST $RB/namespaces/esc/roles \
		"$(role r2 "[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\",\"pods\"],\"verbs\":[\"get\",\"list\",\"delete\"]}]")" &&
	jq -e ".reason == \"Forbidden\" and .code == 403 and
		.details == {name: \"r2\", group: \"rbac.authorization.k8s.io\", kind: \"roles\"}" body.json &&
	jq -r .message body.json >msg &&
	cat >expect <<-\EOT &&
	roles.rbac.authorization.k8s.io "r2" is forbidden: user "dave" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
	{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}
	{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list" "delete"]}
	EOT
	test_cmp expect msg &&
	ksim_expect_code 404 admin-token GET $RB/namespaces/esc/roles/r2
'

test_expect_success 'an update that adds rights its writer lacks is refused the same way; the Role is unchanged' '
	ksim_expect_code 200 dave-token GET $RB/namespaces/esc/roles/r1 &&
	jq -c ".rules = [{apiGroups: [\"\"], resources: [\"pods\"], verbs: [\"get\"], resourceNames: [\"p\"]},
		{nonResourceURLs: [\"/metrics\"], verbs: [\"get\"]}]" body.json >r1.json &&
	ksim_expect_code 403 dave-token PUT $RB/namespaces/esc/roles/r1 "$(cat r1.json)" &&
	jq -r .message body.json >msg &&
	cat >expect <<-\EOT &&
	roles.rbac.authorization.k8s.io "r1" is forbidden: user "dave" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
	{NonResourceURLs:["/metrics"], Verbs:["get"]}
	EOT
	test_cmp expect msg &&
	ksim_expect_code 200 admin-token GET $RB/namespaces/esc/roles/r1 &&
	jq -e ".rules == [{apiGroups: [\"\"], resources: [\"pods\"], verbs: [\"get\"]}]" body.json
'

test_expect_success 'escalate on roles lets its holder write any rules' '
	ksim_expect_code 201 erin-token POST $RB/namespaces/esc/roles \
		"$(role r3 "[{\"apiGroups\":[\"*\"],\"resources\":[\"*\"],\"verbs\":[\"*\"]}]")"
'

test_expect_success 'a ClusterRole with an aggregationRule: only by a writer holding every right (403 as kube-apiserver words it)' '
	agg="{\"metadata\":{\"name\":\"agg\"},\"aggregationRule\":{\"clusterRoleSelectors\":[{\"matchLabels\":{\"x\":\"y\"}}]},\"rules\":[]}" &&
	ksim_expect_code 403 frank-token POST $RB/clusterroles "$agg" &&
	jq -e ".reason == \"Forbidden\" and .details == {name: \"agg\", group: \"rbac.authorization.k8s.io\", kind: \"clusterroles\"}" body.json &&
	jq -r .message body.json >msg &&
	echo "clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: must have cluster-admin privileges to use the aggregationRule" >expect &&
	test_cmp expect msg &&
	ksim_expect_code 201 frank-token POST $RB/clusterroles \
		"{\"metadata\":{\"name\":\"plain\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\"]}]}" &&
	ksim_expect_code 201 admin-token POST $RB/clusterroles "$agg"
'

test_expect_success 'a RoleBinding to a role whose rights its writer holds is created' '
	ksim_expect_code 201 dave-token POST $RB/namespaces/esc/rolebindings "$(binding b1 Role r1)"
'

test_expect_success 'a RoleBinding to a role whose rights its writer lacks: 403 without bind' '
	ksim_expect_code 403 dave-token POST $RB/namespaces/esc/rolebindings "$(binding b2 ClusterRole secret-reader)" &&
	jq -e ".details == {name: \"b2\", group: \"rbac.authorization.k8s.io\", kind: \"rolebindings\"}" body.json &&
	jq -r .message body.json >msg &&
	cat >expect <<-\EOT &&
	rolebindings.rbac.authorization.k8s.io "b2" is forbidden: user "dave" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
	{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}
	EOT
	test_cmp expect msg
'

test_expect_success 'bind on the role by name allows that binding, not one to another role' '
	ksim_expect_code 201 erin-token POST $RB/namespaces/esc/rolebindings "$(binding b3 ClusterRole secret-reader)" &&
	ksim_expect_code 403 erin-token POST $RB/namespaces/esc/rolebindings "$(binding b4 ClusterRole secret-writer)" &&
	jq -r .message body.json >msg &&
	cat >expect <<-\EOT &&
	rolebindings.rbac.authorization.k8s.io "b4" is forbidden: user "erin" (groups=["ops" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
	{APIGroups:[""], Resources:["secrets"], Verbs:["create"]}
	EOT
	test_cmp expect msg
'

test_expect_success 'a binding to a role that does not exist (and no bind on it): 404 as GetRoleReferenceRules says' '
	ksim_expect_code 404 dave-token POST $RB/namespaces/esc/rolebindings "$(binding b5 ClusterRole nothing-here)" &&
	jq -e ".reason == \"NotFound\" and .message == \"clusterroles.rbac.authorization.k8s.io \\\"nothing-here\\\" not found\"" body.json
'

test_expect_success 'the admin (system:masters) binds anything' '
	ksim_expect_code 201 admin-token POST $RB/namespaces/esc/rolebindings "$(binding b6 ClusterRole cluster-admin)"
'

test_expect_success 'impersonated: the impersonated user and groups are compared, not the impersonator' '
	curl -k -sS -m 10 -o body.json -w "%{http_code}\n" -X POST -H "Authorization: Bearer admin-token" \
		-H "Impersonate-User: frank" -H "Impersonate-Group: ops" -H "Content-Type: application/json" \
		-d "$(role r7 "[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],\"verbs\":[\"get\"]}]")" \
		"$KSIM_URL$RB/namespaces/esc/roles" >code &&
	echo 403 >expect && test_cmp expect code &&
	jq -r .message body.json >msg &&
	cat >expect <<-\EOT &&
	roles.rbac.authorization.k8s.io "r7" is forbidden: user "frank" (groups=["ops" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
	{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}
	EOT
	test_cmp expect msg
'

test_expect_success 'kubectl 1.27 and 1.33 show the refusal' '
	jq ".users[0].user = {token: \"dave-token\"}" "$KUBECONFIG" >dave.kubeconfig &&
	for k in kubectl.1.27 kubectl.1.33; do
		test_must_fail env KUBECONFIG=dave.kubeconfig "/usr/lib/google-cloud-sdk/bin/$k" -n esc \
			create role r9 --verb=get --resource=secrets >out 2>err || return 1
		grep "is forbidden: user \"dave\" (groups=\[\"system:authenticated\"\]) is attempting to grant RBAC permissions not currently held" err ||
			{ cat err; return 1; }
	done
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
