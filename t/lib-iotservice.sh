# Helpers for the pipeline/iotservice tests (t21NN): run sync.jq as
# ireconcile would, with jq 1.6's CLI, and resolve its directives with
# lib/render.c through test-tool. Sourced after test-lib.sh.

IOT_PROGRAM="$PROJECT_ROOT/pipeline/iotservice"
IOT_VECTORS="$TEST_DATA/vectors"
IOT_KINDS='["Namespace.v1","RoleBinding.rbac.authorization.k8s.io/v1","Secret.v1","Service.v1","Deployment.apps/v1","StatefulSet.apps/v1","NetworkPolicy.networking.k8s.io/v1","Pod.v1"]'

# iot_sync INPUT OUTPUT: one reconcile: render.jq's answer for INPUT (given
# whole: ireconcile gives it the parent without status, related and
# settings), its {"$fn"} directives resolved, given to sync.jq as .rendered
# (whole: ireconcile passes each object through its kind's project); OUTPUT
# holds sync's answer with every directive resolved.
iot_sync () {
	jq -c -L "$PROJECT_ROOT/pipeline/lib" -L "$IOT_PROGRAM" -f "$IOT_PROGRAM/render.jq" <"$1" >"$2.render" &&
	"$KOP_TEST_TOOL" fn-resolve <"$2.render" >"$2.rendered" &&
	jq -c --slurpfile r "$2.rendered" '.rendered = $r[0]' "$1" >"$2.in" &&
	jq -c -L "$PROJECT_ROOT/pipeline/lib" -L "$IOT_PROGRAM" -f "$IOT_PROGRAM/sync.jq" <"$2.in" >"$2.raw" &&
	"$KOP_TEST_TOOL" fn-resolve <"$2.raw" >"$2"
}

# iot_input PARENT [VIEW [EXTRA]] >INPUT: the program's input for the
# IoTService in file PARENT, the observed children VIEW (a JSON array of
# objects, default none) and EXTRA (a JSON object merged on top: errors,
# aggregates, finalizing, now, settings).
iot_input () {
	iot_extra=${3:-'{}'}
	jq -n --slurpfile p "$1" --slurpfile v "${2:-/dev/null}" --argjson kinds "$IOT_KINDS" \
		--argjson extra "$iot_extra" '
		($kinds | map({(.): {}}) | add) as $empty
		| {parent: $p[0],
		   children: (reduce (($v[0] // [])[]) as $o ($empty;
			.["\($o.kind).\($o.apiVersion)"][$o.metadata.name] = $o)),
		   related: {"Secret.v1": {"devawsk8s/image-pull-secret": {apiVersion: "v1", kind: "Secret",
			metadata: {name: "image-pull-secret", namespace: "devawsk8s"},
			type: "kubernetes.io/dockerconfigjson", data: {".dockerconfigjson": "eyJhdXRocyI6e319"}}}},
		   settings: {operatorName: "devawsk8s", maxParallelUpdates: 30, progressDeadlineSeconds: 900},
		   aggregates: {rolling: []}, errors: [], finalizing: false, now: "2026-11-22T10:00:00Z"} * $extra'
}

# iot_live OUTPUT [STATE] >VIEW: the children of a resolved OUTPUT as the
# API server would hold them, with workloads "ready" (default) or "created"
# (rolled out, no pod ready yet), and a Running pod per ready workload.
iot_live () {
	jq -c --arg state "${2:-ready}" '
		[.children[]
		 | .metadata.uid = "uid-\(.kind)-\(.metadata.name)" | .metadata.generation = 1
		 | if .kind == "Deployment" and $state == "ready" then
			.status = {observedGeneration: 1, replicas: .spec.replicas, updatedReplicas: .spec.replicas,
				   readyReplicas: .spec.replicas, availableReplicas: .spec.replicas}
		   elif .kind == "StatefulSet" and $state == "ready" then
			.status = {observedGeneration: 1, replicas: .spec.replicas, readyReplicas: .spec.replicas,
				   currentRevision: "r1", updateRevision: "r1"}
		   elif .kind == "Service" and .spec.type == "LoadBalancer" and $state == "ready" then
			.status = {loadBalancer: {ingress: [{ip: "127.0.0.1"}]}}
		   elif .kind == "Deployment" then
			.status = {observedGeneration: 1, replicas: .spec.replicas, updatedReplicas: .spec.replicas,
				   unavailableReplicas: .spec.replicas}
		   elif .kind == "StatefulSet" then
			.status = {observedGeneration: 1, replicas: .spec.replicas, currentRevision: "r1", updateRevision: "r1"}
		   else . end]
		+ (if $state == "ready" then
			[.children[] | select(.kind == "Deployment" or .kind == "StatefulSet")
			 | {apiVersion: "v1", kind: "Pod",
			    metadata: {name: "\(.metadata.name)-0", namespace: .metadata.namespace,
				       labels: .spec.template.metadata.labels},
			    status: {phase: "Running"}}]
		   else [] end)' <"$1"
}

# iot_own_ns PARENT >VIEW: a view holding only the instance namespace of the
# IoTService in file PARENT, as the operator creates it (labels, Pod Security's
# among them, and the annotation with the IoTService's uid): the instance namespace is "ours".
iot_own_ns () {
	jq -c '[{apiVersion: "v1", kind: "Namespace",
		 metadata: {name: "devawsk8s-\(.metadata.name)", uid: "uid-ns-\(.metadata.name)",
			    labels: {"app.kubernetes.io/managed-by": "iot-operator", "cp.iot.sap/operator": "devawsk8s",
				     "cp.iot.sap/instance": .metadata.name, instance: .metadata.name,
				     "pod-security.kubernetes.io/enforce": "baseline"},
			    annotations: {"cp.iot.sap/iotservice-uid": .metadata.uid}},
		 status: {phase: "Active"}}]' "$1"
}

# iot_parent FILTER >PARENT: the example IoTService (generation 1, in
# devawsk8s) changed by the jq FILTER.
iot_parent () {
	jq -c "(.apiVersion = \"cp.iot.sap/v1\" | .metadata.generation = 1 | .metadata.uid = \"uid-iot\") | $1" \
		"$IOT_VECTORS/example-iotservice.json"
}
