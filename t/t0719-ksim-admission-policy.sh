#!/bin/sh
test_description='ksim: ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) refuse writes as kube-apiserver does: resource rules, matchConditions, validations in order, reasons and codes, failurePolicy, Warn, DELETE, and the exact message with kubectl 1.27 and 1.33'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t0719-ksim-admission-policy"
ksim_kubectls

# TLS: kubectl sends a bearer token over HTTPS only.
ksim_start --tls --authorization rbac --token admin-token --token-file "$F/tokens.csv" --no-simulate



cm () {
	printf '{"metadata":{"name":"%s"}%s}' "$1" "${2:+,\"data\":$2}"
}

test_expect_success 'discovery serves both kinds; the admin applies policies and bindings with kubectl' '
	ksim_curl -o arv1.json /apis/admissionregistration.k8s.io/v1 &&
	jq -r "[.resources[] | \"\(.name) \(.kind) \(.namespaced)\"] | sort | .[]" arv1.json >actual &&
	cat >expect <<-\EOT &&
	validatingadmissionpolicies ValidatingAdmissionPolicy false
	validatingadmissionpolicies/status ValidatingAdmissionPolicy false
	validatingadmissionpolicybindings ValidatingAdmissionPolicyBinding false
	EOT
	test_cmp expect actual &&
	kubectl apply -f "$F/policy.yaml" >out &&
	kubectl get validatingadmissionpolicybindings -o name >actual &&
	grep -x validatingadmissionpolicybinding.admissionregistration.k8s.io/cm-owner-binding actual &&
	jq ".users[0].user = {token: \"alice-token\"}" "$KUBECONFIG" >alice.kubeconfig
'

test_expect_success 'a false validation without message or reason: 422 Invalid, "failed expression: ...", as kube-apiserver answers' '
	ksim_expect_code 422 alice-token POST /api/v1/namespaces/prod/configmaps "$(cm c1)" &&
	jq -S "del(.metadata)" body.json >actual &&
	jq -S . >expect <<-\EOT &&
	{"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422, "reason": "Invalid",
	 "message": "configmaps \"c1\" is forbidden: ValidatingAdmissionPolicy '"'"'cm-owner'"'"' with binding '"'"'cm-owner-binding'"'"' denied request: failed expression: has(object.data) && '"'"'owner'"'"' in object.data",
	 "details": {"name": "c1", "kind": "configmaps",
	   "causes": [{"message": "ValidatingAdmissionPolicy '"'"'cm-owner'"'"' with binding '"'"'cm-owner-binding'"'"' denied request: failed expression: has(object.data) && '"'"'owner'"'"' in object.data"}]}}
	EOT
	test_cmp expect actual
'

test_expect_success 'the validation holds, or a matchCondition is false (another user, another namespace): admitted' '
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/prod/configmaps "$(cm c2 "{\"owner\":\"a\"}")" &&
	ksim_expect_code 201 admin-token POST /api/v1/namespaces/prod/configmaps "$(cm c3)" &&
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/dev/configmaps "$(cm c4)"
'

test_expect_success 'UPDATE is checked with the new object: a patch dropping the owner is refused' '
	ksim_expect_code 422 alice-token PATCH /api/v1/namespaces/prod/configmaps/c2 "{\"data\":null}" &&
	jq -r .message body.json | grep -F "denied request: failed expression:" &&
	ksim_expect_code 200 alice-token PATCH /api/v1/namespaces/prod/configmaps/c2 "{\"data\":{\"owner\":\"b\"}}"
'

test_expect_success 'DELETE is checked with oldObject, reason Forbidden gives 403 and the message' '
	ksim_expect_code 200 admin-token PATCH /api/v1/namespaces/dev/configmaps/c4 "{\"metadata\":{\"labels\":{\"keep\":\"y\"}}}" &&
	ksim_expect_code 403 alice-token DELETE /api/v1/namespaces/dev/configmaps/c4 &&
	jq -r "[.code, .reason, .message] | join(\" \")" body.json >actual &&
	echo "403 Forbidden configmaps \"c4\" is forbidden: ValidatingAdmissionPolicy '"'"'keep'"'"' with binding '"'"'keep'"'"' denied request: objects labelled keep are not deleted" >expect &&
	test_cmp expect actual &&
	ksim_expect_code 403 alice-token DELETE "/api/v1/namespaces/dev/configmaps?labelSelector=keep" &&
	ksim_expect_code 200 admin-token GET /api/v1/namespaces/dev/configmaps/c4 &&
	ksim_expect_code 200 alice-token DELETE /api/v1/namespaces/prod/configmaps/c3
'

test_expect_success 'an evaluation error: failurePolicy Fail refuses (422, the error named), Ignore admits' '
	ksim_expect_code 422 alice-token POST /api/v1/namespaces/prod/secrets "{\"metadata\":{\"name\":\"s1\"}}" &&
	jq -r .message body.json >actual &&
	echo "secrets \"s1\" is forbidden: ValidatingAdmissionPolicy '"'"'secret-fail'"'"' with binding '"'"'secret-fail'"'"' denied request: expression '"'"'object.data.kind == \"ok\"'"'"' resulted in error: no such key: data" >expect &&
	test_cmp expect actual &&
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/dev/secrets "{\"metadata\":{\"name\":\"s1\"}}"
'

test_expect_success 'validationActions Warn: admitted, with a Warning header' '
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/dev/serviceaccounts "{\"metadata\":{\"name\":\"bot\"}}" &&
	grep -i "^warning: 299 - \"Validation failed for ValidatingAdmissionPolicy '"'"'sa-warn'"'"' with binding '"'"'sa-warn'"'"': service accounts are named sa-\*\"" headers.txt
'

test_expect_success 'kubectl 1.27 and 1.33 print the server'"'"'s message' '
	for kc in $versions; do
		if "$kc" --kubeconfig alice.kubeconfig create configmap k1 -n prod --from-literal=a=b >out 2>err; then
			echo "$kc: created" && return 1
		fi &&
		echo "error: failed to create configmap: configmaps \"k1\" is forbidden: ValidatingAdmissionPolicy '"'"'cm-owner'"'"' with binding '"'"'cm-owner-binding'"'"' denied request: failed expression: has(object.data) && '"'"'owner'"'"' in object.data" >expect &&
		test_cmp expect err &&
		if "$kc" --kubeconfig alice.kubeconfig delete configmap c4 -n dev >out 2>err; then
			echo "$kc: deleted" && return 1
		fi &&
		echo "Error from server (Forbidden): configmaps \"c4\" is forbidden: ValidatingAdmissionPolicy '"'"'keep'"'"' with binding '"'"'keep'"'"' denied request: objects labelled keep are not deleted" >expect &&
		test_cmp expect err || return 1
	done
'

test_expect_success 'a policy ksim cannot enforce fully is refused when written, naming what and where' '
	cat >bad.json <<-\EOT &&
	{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
	 "metadata": {"name": "bad"},
	 "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
	   "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]},
	   "validations": [{"expression": "true"}, {"expression": "object.data.exists(k, k.matches(\"^x\"))"}]}}
	EOT
	ksim_expect_code 422 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies "$(cat bad.json)" &&
	jq -r ".details.causes[] | \"\(.field): \(.message)\"" body.json >actual &&
	cat >expect <<-\EOT &&
	spec.paramKind: Unsupported value: ksim does not implement paramKind
	spec.validations[1].expression: Invalid value: "object.data.exists(k, k.matches(\"^x\"))": compilation failed: ksim'"'"'s CEL subset: 1:25: unsupported function '"'"'matches'"'"'
	EOT
	test_cmp expect actual &&
	ksim_expect_code 404 admin-token GET /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/bad
'

test_expect_success 'with the bindings deleted, nothing is refused' '
	kubectl delete validatingadmissionpolicybindings --all >out &&
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/prod/configmaps "$(cm c5)" &&
	ksim_expect_code 200 alice-token DELETE /api/v1/namespaces/dev/configmaps/c4
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
