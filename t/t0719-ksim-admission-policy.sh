#!/bin/sh
test_description='ksim: ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) refuse writes as kube-apiserver does: resource rules and their scope, matchPolicy, matchConditions, validations in order, CEL macros, reasons and codes, failurePolicy, Warn, DELETE, the request of a Namespace, the exemption of policies, and the exact message with kubectl 1.27 and 1.33'
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

test_expect_success 'the second set of policies (more.yaml), with CEL macros, applied' '
	kubectl apply -f "$F/more.yaml" >out &&
	kubectl get validatingadmissionpolicies -o name >names &&
	grep -c . names >n && echo 10 >expect && test_cmp expect n
'

# message_is WANT: the refusal in body.json, with its code and reason
message_is () {
	jq -r "[.code, .reason, .message] | join(\" \")" body.json >actual &&
	echo "$1" >expect &&
	test_cmp expect actual
}

test_expect_success 'scope: Namespaced matches a ConfigMap, not a ClusterRole nor a Namespace; Cluster the other way round' '
	ksim_expect_code 403 alice-token POST /api/v1/namespaces/dev/configmaps \
		"{\"metadata\":{\"name\":\"sc\",\"labels\":{\"scope-test\":\"y\"}}}" &&
	message_is "403 Forbidden configmaps \"sc\" is forbidden: ValidatingAdmissionPolicy '"'"'scope-namespaced'"'"' with binding '"'"'scope-namespaced'"'"' denied request: namespaced" &&
	ksim_expect_code 403 alice-token POST /apis/rbac.authorization.k8s.io/v1/clusterroles \
		"{\"metadata\":{\"name\":\"sc\",\"labels\":{\"scope-test\":\"y\"}},\"rules\":[]}" &&
	message_is "403 Forbidden clusterroles.rbac.authorization.k8s.io \"sc\" is forbidden: ValidatingAdmissionPolicy '"'"'scope-cluster'"'"' with binding '"'"'scope-cluster'"'"' denied request: cluster" &&
	ksim_expect_code 403 alice-token POST /api/v1/namespaces \
		"{\"metadata\":{\"name\":\"sc\",\"labels\":{\"scope-test\":\"y\"}}}" &&
	message_is "403 Forbidden namespaces \"sc\" is forbidden: ValidatingAdmissionPolicy '"'"'scope-cluster'"'"' with binding '"'"'scope-cluster'"'"' denied request: cluster" &&
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/dev/configmaps "{\"metadata\":{\"name\":\"sc\"}}"
'

test_expect_success 'a Namespace'"'"'s own request: request.namespace is its name but on create, namespaceObject null, as on kube-apiserver' '
	ksim_expect_code 201 alice-token POST /api/v1/namespaces "{\"metadata\":{\"name\":\"self\",\"labels\":{\"ns-self\":\"y\"}}}" &&
	ksim_expect_code 200 alice-token PATCH /api/v1/namespaces/self "{\"metadata\":{\"labels\":{\"more\":\"y\"}}}" &&
	ksim_expect_code 200 alice-token DELETE /api/v1/namespaces/self
'

test_expect_success 'a CEL macro in a validation, reason RequestEntityTooLarge: 413' '
	ksim_expect_code 413 alice-token POST /api/v1/namespaces/dev/configmaps \
		"{\"metadata\":{\"name\":\"big\",\"labels\":{\"big\":\"y\"}},\"data\":{\"a\":\"1\",\"b\":\"12345\"}}" &&
	message_is "413 RequestEntityTooLarge configmaps \"big\" is forbidden: ValidatingAdmissionPolicy '"'"'big'"'"' with binding '"'"'big'"'"' denied request: too big" &&
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/dev/configmaps \
		"{\"metadata\":{\"name\":\"big\",\"labels\":{\"big\":\"y\"}},\"data\":{\"a\":\"1\",\"b\":\"1234\"}}"
'

test_expect_success 'matchPolicy Exact: events.k8s.io/v1 events refused, core v1 events (the same storage) not' '
	ksim_expect_code 403 alice-token POST /apis/events.k8s.io/v1/namespaces/dev/events \
		"{\"metadata\":{\"name\":\"e1\"},\"eventTime\":\"2026-01-01T00:00:00.000000Z\",\"reportingController\":\"t\",\"reportingInstance\":\"t\",\"action\":\"a\",\"reason\":\"r\",\"type\":\"Normal\",\"regarding\":{\"kind\":\"ConfigMap\",\"namespace\":\"dev\",\"name\":\"sc\"}}" &&
	message_is "403 Forbidden events.events.k8s.io \"e1\" is forbidden: ValidatingAdmissionPolicy '"'"'events-exact'"'"' with binding '"'"'events-exact'"'"' denied request: no events.k8s.io events" &&
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/dev/events \
		"{\"metadata\":{\"name\":\"e2\"},\"involvedObject\":{\"kind\":\"ConfigMap\",\"namespace\":\"dev\",\"name\":\"sc\"},\"reason\":\"r\",\"message\":\"m\",\"type\":\"Normal\"}"
'

vap_json () { # NAME RULE [MATCH-POLICY-JSON-MEMBER]
	printf '{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "%s"}, "spec": {"failurePolicy": "Fail", "matchConstraints": {%s"resourceRules": [%s]}, "validations": [{"expression": "false"}]}}' "$1" "$3" "$2"
}

test_expect_success 'matchPolicy Equivalent (the default) where ksim would have to convert: refused when written, naming it; kube-apiserver'"'"'s values checked' '
	vap_json ev "{\"apiGroups\": [\"\"], \"apiVersions\": [\"v1\"], \"operations\": [\"CREATE\"], \"resources\": [\"events\"]}" >ev.json &&
	ksim_expect_code 422 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies "$(cat ev.json)" &&
	jq -r ".details.causes[] | \"\(.field): \(.message)\"" body.json >actual &&
	echo "spec.matchConstraints.matchPolicy: Unsupported value: ksim does not implement matchPolicy Equivalent where it differs from Exact: resourceRules take v1 events and, through it, its equivalent events.k8s.io/v1 events, to which ksim does not convert (set matchPolicy: Exact, and list each version the policy is for)" >expect &&
	test_cmp expect actual &&
	vap_json ev "{\"apiGroups\": [\"\"], \"apiVersions\": [\"v1\"], \"operations\": [\"CREATE\"], \"resources\": [\"events\"]}" "\"matchPolicy\": \"Exact\", " >ev.json &&
	ksim_expect_code 201 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies "$(cat ev.json)" &&
	vap_json bad "{\"apiGroups\": [\"*\"], \"apiVersions\": [\"*\"], \"operations\": [\"CREATE\"], \"resources\": [\"*\"], \"scope\": \"Namespace\"}" "\"matchPolicy\": \"Fuzzy\", " |
		jq -c ".spec.validations[0].reason = \"NotFound\"" >bad.json &&
	ksim_expect_code 422 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies "$(cat bad.json)" &&
	jq -r ".details.causes[] | \"\(.field): \(.message)\"" body.json >actual &&
	cat >expect <<-\EOT &&
	spec.matchConstraints.matchPolicy: Unsupported value: "Fuzzy": supported values: "Equivalent", "Exact"
	spec.matchConstraints.resourceRules[0].scope: Unsupported value: "Namespace": supported values: "*", "Cluster", "Namespaced"
	spec.validations[0].reason: Unsupported value: "NotFound": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge"
	EOT
	test_cmp expect actual
'

test_expect_success 'a policy that comes to match a request only through a CRD version added later: refused under Fail, as a policy kube-apiserver cannot configure' '
	cat >gadgets.yaml <<-\EOT &&
	apiVersion: apiextensions.k8s.io/v1
	kind: CustomResourceDefinition
	metadata: {name: gadgets.example.com}
	spec:
	  group: example.com
	  names: {kind: Gadget, plural: gadgets}
	  scope: Namespaced
	  versions:
	  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
	EOT
	kubectl apply -f gadgets.yaml >out &&
	kubectl wait --for=condition=Established crd/gadgets.example.com --timeout=10s >out &&
	vap_json gadget-v1 "{\"apiGroups\": [\"example.com\"], \"apiVersions\": [\"v1\"], \"operations\": [\"CREATE\"], \"resources\": [\"gadgets\"]}" >g.json &&
	ksim_expect_code 201 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies "$(cat g.json)" &&
	ksim_expect_code 201 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings \
		"{\"metadata\":{\"name\":\"gadget-v1\"},\"spec\":{\"policyName\":\"gadget-v1\",\"validationActions\":[\"Deny\"]}}" &&
	sed "s/^  - {name: v1, served: true, storage: true, \(.*\)}\$/&\n  - {name: v2, served: true, storage: false, \1}/" gadgets.yaml >gadgets2.yaml &&
	grep "name: v2" gadgets2.yaml &&
	kubectl apply -f gadgets2.yaml >out &&
	ksim_wait_get 10 "any(.resources[]; .name == \"gadgets\")" /apis/example.com/v2 &&
	ksim_expect_code 422 alice-token POST /apis/example.com/v2/namespaces/dev/gadgets \
		"{\"apiVersion\":\"example.com/v2\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"g2\"}}" &&
	message_is "422 Invalid gadgets.example.com \"g2\" is forbidden: ValidatingAdmissionPolicy '"'"'gadget-v1'"'"' denied request: failed to configure policy: failed to convert object version: ksim does not convert example.com/v2 gadgets to example.com/v1, which matchPolicy Equivalent matches it through (use matchPolicy: Exact)" &&
	ksim_expect_code 422 alice-token POST /apis/example.com/v1/namespaces/dev/gadgets \
		"{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"g1\"}}" &&
	message_is "422 Invalid gadgets.example.com \"g1\" is forbidden: ValidatingAdmissionPolicy '"'"'gadget-v1'"'"' with binding '"'"'gadget-v1'"'"' denied request: failed expression: false"
'

test_expect_success 'the policies and bindings themselves are exempt from policies, as on kube-apiserver' '
	vap_json all-writes "{\"apiGroups\": [\"*\"], \"apiVersions\": [\"*\"], \"operations\": [\"*\"], \"resources\": [\"*\", \"*/*\"]}" |
		jq -c ".spec.matchConditions = [{\"name\": \"alice\", \"expression\": \"request.userInfo.username == '"'"'alice'"'"'\"}]" >all.json &&
	ksim_expect_code 201 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies "$(cat all.json)" &&
	ksim_expect_code 201 admin-token POST /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings \
		"{\"metadata\":{\"name\":\"all-writes\"},\"spec\":{\"policyName\":\"all-writes\",\"validationActions\":[\"Deny\"]}}" &&
	ksim_expect_code 422 alice-token POST /api/v1/namespaces/dev/configmaps "{\"metadata\":{\"name\":\"aw\"}}" &&
	ksim_expect_code 200 alice-token DELETE /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/all-writes &&
	ksim_expect_code 201 alice-token POST /api/v1/namespaces/dev/configmaps "{\"metadata\":{\"name\":\"aw\"}}"
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
