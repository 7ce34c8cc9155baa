#!/bin/sh
test_description='deploy/ and deploy-sharded/: kustomize output, kubectl apply -k deploy/ (dry-run=server and for real) on ksim, the CRD schema'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

DEPLOY="$PROJECT_ROOT/deploy"
ksim_kubectls
set -- $versions
KUBECTL=$1

k () {
	timeout 30 "$KUBECTL" "$@"
}

test_expect_success 'kustomization: the operator and its RBAC, not the example' '
	k kustomize "$DEPLOY" >all.yaml &&
	grep "^kind:" all.yaml | sort >kinds &&
	cat >expect <<-\EOT &&
	kind: ClusterRole
	kind: ClusterRole
	kind: ClusterRoleBinding
	kind: CustomResourceDefinition
	kind: Deployment
	kind: Namespace
	kind: Role
	kind: RoleBinding
	kind: Secret
	kind: ServiceAccount
	EOT
	test_cmp expect kinds &&
	! grep "^kind: IoTService" all.yaml
'

test_expect_success 'the Deployment: non-root, read-only root, no escalation, probes, env from the pod' '
	"$KOP_TEST_TOOL" yaml "$DEPLOY/operator.yaml" >dep.json &&
	jq -e ".spec.template.spec.securityContext.runAsNonRoot == true" dep.json &&
	jq -e ".spec.template.spec.containers[0] |
		.securityContext.readOnlyRootFilesystem == true and
		.securityContext.allowPrivilegeEscalation == false and
		.readinessProbe.httpGet.path == \"/readyz\" and .livenessProbe.httpGet.path == \"/healthz\" and
		.ports[0].containerPort == 60000 and .resources.limits.memory != null and
		(.env[] | select(.name == \"OPERATOR_NAME\") | .valueFrom.fieldRef.fieldPath) == \"metadata.namespace\" and
		(.env[] | select(.name == \"POD_NAME\") | .valueFrom.fieldRef.fieldPath) == \"metadata.name\"" dep.json
'

# The objects of a YAML stream as one sorted JSON array (the project's YAML reader).
objects () {
	"$KOP_TEST_TOOL" yaml "$1" >"$1.jsonl" &&
	jq -S -s 'map(select(. != null)) | sort_by(.kind, .metadata.namespace // "", .metadata.name)' "$1.jsonl"
}

# deploy-sharded/ (docs/sharding.md) is deploy/ with three things changed: the Deployment's replicas
# and args, and the Role iot-operator-shards with its RoleBinding. The rest is deploy/'s, object for
# object; deploy/ itself keeps 2 replicas, leader election, no shards.
test_expect_success 'deploy-sharded/ with each kubectl: deploy/, 3 replicas, --shards=16, the Role iot-operator-shards' '
	objects all.yaml >base.json &&
	jq -e "(.[] | select(.kind == \"Deployment\") | .spec | [.replicas, .template.spec.containers[0].args]) ==
		[2, [\"--metrics-addr=:60000\", \"--leader-elect\"]] and
		all(.[]; .metadata.name != \"iot-operator-shards\")" base.json &&
	cat >shards-role.json <<-\EOT &&
	[
	  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
	  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
	   "resourceNames": ["iot-operator-shard-00", "iot-operator-shard-01", "iot-operator-shard-02",
	     "iot-operator-shard-03", "iot-operator-shard-04", "iot-operator-shard-05", "iot-operator-shard-06",
	     "iot-operator-shard-07", "iot-operator-shard-08", "iot-operator-shard-09", "iot-operator-shard-10",
	     "iot-operator-shard-11", "iot-operator-shard-12", "iot-operator-shard-13", "iot-operator-shard-14",
	     "iot-operator-shard-15"],
	   "verbs": ["get", "update"]},
	  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "update", "delete"]}
	]
	EOT
	for kc in $versions; do
		timeout 30 "$kc" kustomize "$PROJECT_ROOT/deploy-sharded" >sharded.yaml &&
		objects sharded.yaml >sharded.json &&
		jq -e "(.[] | select(.kind == \"Deployment\") | .spec | [.replicas, .template.spec.containers[0].args]) ==
			[3, [\"--metrics-addr=:60000\", \"--leader-elect\", \"--shards=16\"]]" sharded.json &&
		jq -e --slurpfile rules shards-role.json "[.[] | select(.metadata.name == \"iot-operator-shards\")] |
			length == 2 and all(.[]; .metadata.namespace == \"devawsk8s\") and
			(.[] | select(.kind == \"Role\") | .rules) == \$rules[0] and
			(.[] | select(.kind == \"RoleBinding\") | [.roleRef, .subjects]) ==
			[{apiGroup: \"rbac.authorization.k8s.io\", kind: \"Role\", name: \"iot-operator-shards\"},
			 [{kind: \"ServiceAccount\", name: \"iot-operator\", namespace: \"devawsk8s\"}]]" sharded.json &&
		jq -S "map(select(.metadata.name != \"iot-operator-shards\") |
			if .kind == \"Deployment\" then .spec.replicas = 2 |
				.spec.template.spec.containers[0].args -= [\"--shards=16\"] else . end)" sharded.json >rest.json &&
		test_cmp base.json rest.json ||
		{ echo "with $kc"; return 1; }
	done
'

test_expect_success 'the CRD: both versions, v1 storage, every default of the spec, printer columns' '
	"$KOP_TEST_TOOL" yaml "$DEPLOY/crd.yaml" >crd.json &&
	jq -e ".spec.versions | map({name, served, storage}) ==
		[{name: \"v1\", served: true, storage: true}, {name: \"v1alpha1\", served: true, storage: false}]" crd.json &&
	jq -e ".spec.conversion.strategy == \"None\" and .spec.names.shortNames == [\"iot\"]" crd.json &&
	jq -e ".spec.versions[0].additionalPrinterColumns | map([.name, .jsonPath, (.priority // 0)]) ==
		[[\"Status\", \".status.phase\", 0], [\"Reason\", \".status.reason\", 1], [\"Age\", \".metadata.creationTimestamp\", 0]]" crd.json &&
	jq -e ".spec.versions[0].schema.openAPIV3Schema.properties.status.properties.phase.enum ==
		[\"Processing\", \"Available\", \"Failed\"]" crd.json &&
	jq -r "[.spec.versions[0].schema.openAPIV3Schema.properties.spec | paths(type == \"object\" and has(\"default\") and (.default | type) != \"object\")] | length" crd.json >ndefaults &&
	echo 41 >expect && test_cmp expect ndefaults
'

for KUBECTL in $versions; do
	V=$(basename "$KUBECTL")
	ksim_start
	rm -rf "$KUBECACHEDIR"

	# As on a real API server, a dry run cannot create objects in a namespace
	# that does not exist yet: the namespace is there first.
	test_expect_success "$V: kubectl apply -k deploy/ --dry-run=server is accepted" '
		echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"devawsk8s\"}}" >ns.json &&
		k apply -f ns.json &&
		k apply -k "$DEPLOY" --dry-run=server >out 2>err &&
		cat out &&
		grep "customresourcedefinition.apiextensions.k8s.io/iotservices.cp.iot.sap created (server dry run)" out &&
		grep "deployment.apps/iot-operator created (server dry run)" out &&
		grep "secret/image-pull-secret created (server dry run)" out &&
		test "$(grep -c "(server dry run)" out)" = 10 &&
		test_must_fail k get crd iotservices.cp.iot.sap &&
		test_must_fail k get -n devawsk8s deploy iot-operator
	'

	test_expect_success "$V: kubectl apply -k deploy/ installs it" '
		k apply -k "$DEPLOY" >out 2>err &&
		grep "customresourcedefinition.apiextensions.k8s.io/iotservices.cp.iot.sap created" out &&
		grep "clusterrole.rbac.authorization.k8s.io/iot-operator created" out &&
		k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s &&
		k get -n devawsk8s secret image-pull-secret -o json >secret.json &&
		jq -e ".type == \"kubernetes.io/dockerconfigjson\"" secret.json &&
		k get -n devawsk8s deploy/iot-operator serviceaccount/iot-operator role/iot-operator rolebinding/iot-operator &&
		k get clusterrole/iot-operator-instance &&
		k apply -k "$DEPLOY" >out2 2>err &&
		! grep -v unchanged out2 &&
		k apply -k "$DEPLOY" --dry-run=server >out3 2>err &&
		test "$(grep -c "(server dry run)" out3)" = 10
	'

	test_expect_success "$V: the CRD accepts the example (v1) and fills the defaults" '
		k apply -f "$DEPLOY/example-iotservice.yaml" >out &&
		k get iot -n devawsk8s example-iotservice -o json >ex.json &&
		jq -e ".apiVersion == \"cp.iot.sap/v1\" and .spec.mms.container_port_jms == \"61619\" and
			.spec.gateway.rest.commands_ttl == 21600000 and .spec.gateway.mqtt.tenant_exposed == false and
			.spec.on_boarding == \"oneproduct\" and .spec.core_spring.enabled == true" ex.json
	'

	test_expect_success "$V: the CRD rejects a status phase outside the enum and a string size" '
		test_must_fail k patch iot -n devawsk8s example-iotservice --subresource=status --type=merge \
			-p "{\"status\":{\"phase\":\"Bogus\"}}" 2>err &&
		grep "Unsupported value" err &&
		k patch iot -n devawsk8s example-iotservice --subresource=status --type=merge \
			-p "{\"status\":{\"phase\":\"Processing\"}}" &&
		test_must_fail k patch iot -n devawsk8s example-iotservice --type=merge \
			-p "{\"spec\":{\"core\":{\"size\":\"two\"}}}" 2>err &&
		grep -i "invalid" err
	'

	test_expect_success "$V: v1alpha1 is served" '
		cat >alpha.yaml <<-\EOT &&
		apiVersion: cp.iot.sap/v1alpha1
		kind: IoTService
		metadata: {name: alpha, namespace: devawsk8s}
		spec: {core: {size: 1}}
		EOT
		k apply -f alpha.yaml &&
		k get iotservices.v1alpha1.cp.iot.sap -n devawsk8s alpha -o json >alpha.json &&
		jq -e ".spec.core.size == 1" alpha.json
	'

	ksim_stop
done

test_done
