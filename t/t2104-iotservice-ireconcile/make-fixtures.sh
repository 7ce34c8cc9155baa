#!/bin/sh
# Regenerates the recorded-style event files of t2104 from the example
# IoTService (run from t/, after a build; the files are committed, and a
# person reads the diff). The live objects carry what the API server adds on
# write (uid, resourceVersion, defaults such as protocol, clusterIP,
# terminationMessagePath), so the tests also show that the program's desired
# objects compare equal to what a server stores.
set -e
cd "$(dirname "$0")/.."
TEST_NAME=t2104-iotservice-ireconcile
PROJECT_ROOT=$(cd .. && pwd)
TEST_DATA="$PROJECT_ROOT/t/data"
: "${KOP_TEST_TOOL:=$PROJECT_ROOT/build/t/test-tool}"
. ./lib-iotservice.sh
F=$TEST_NAME
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

iot_parent '.metadata += {resourceVersion: "100", creationTimestamp: "2026-11-22T09:00:00Z"}' >"$W/parent.json"
# (every child is desired once the instance namespace is seen, and is ours)
iot_own_ns "$W/parent.json" >"$W/ns.json"
iot_input "$W/parent.json" "$W/ns.json" >"$W/in.json"
iot_sync "$W/in.json" "$W/out.json"

# server-side defaults and identity on the live children (of OUTPUT, default
# out.json), each with the iot-operator/applied annotation ireconcile gave it
live () {
	jq -c '.children[]' "${2:-$W/out.json}" | "$KOP_TEST_TOOL" stamp-applied uid-iot |
		jq -s '{children: .}' >"$W/stamped.json"
	iot_live "$W/stamped.json" "$1" | jq -c '
	def podspec: .containers |= map(.terminationMessagePath = "/dev/termination-log" | .terminationMessagePolicy = "File"
		| .ports |= map(.protocol = "TCP") | .resources //= {})
		| .restartPolicy = "Always" | .dnsPolicy = "ClusterFirst" | .schedulerName = "default-scheduler"
		| .terminationGracePeriodSeconds = 30 | .securityContext //= {}
		| .volumes |= (if . then map(if .secret then .secret.defaultMode = 420 else . end) else empty end);
	.[] | .metadata.resourceVersion = "2\(.metadata.name | length)" | .metadata.creationTimestamp = "2026-11-22T09:00:01Z"
	| if .kind == "Deployment" then .spec.revisionHistoryLimit = 10 | .spec.progressDeadlineSeconds = 600
		| .spec.strategy = {type: "RollingUpdate", rollingUpdate: {maxSurge: "25%", maxUnavailable: "25%"}}
		| .spec.template.spec |= podspec
	  elif .kind == "StatefulSet" then .spec.podManagementPolicy = "OrderedReady"
		| .spec.updateStrategy = {type: "RollingUpdate", rollingUpdate: {partition: 0}}
		| .spec.template.spec |= podspec
		| .spec.volumeClaimTemplates |= map(.apiVersion = "v1" | .kind = "PersistentVolumeClaim"
			| .spec.volumeMode = "Filesystem" | .status = {phase: "Pending"})
	  elif .kind == "Service" then .spec.clusterIP = "10.0.0.\(.metadata.name | length)"
		| .spec.clusterIPs = [.spec.clusterIP] | .spec.sessionAffinity = "None"
		| .spec.ipFamilies = ["IPv4"] | .spec.ipFamilyPolicy = "SingleStack"
		| .spec.internalTrafficPolicy = "Cluster"
		| if .spec.type == "LoadBalancer" then .spec.allocateLoadBalancerNodePorts = true
			| .spec.ports |= map(.nodePort = 30000 + .port % 1000)
			| .spec.healthCheckNodePort = 31999 else . end
	  elif .kind == "Namespace" then .spec = {finalizers: ["kubernetes"]} | .status = {phase: "Active"}
		| .metadata.labels["kubernetes.io/metadata.name"] = .metadata.name
	  else . end'
}
live ready >"$W/ready.jsonl"
live created >"$W/created.jsonl"

ev () { jq -c "{type: \"${1:-ADDED}\", object: .}"; }
secret='{"apiVersion":"v1","kind":"Secret","metadata":{"name":"image-pull-secret","namespace":"devawsk8s","uid":"uid-ps","resourceVersion":"5"},"type":"kubernetes.io/dockerconfigjson","data":{".dockerconfigjson":"eyJhdXRocyI6e319"}}'
bookmark='{"type":"BOOKMARK","object":{"kind":"IoTService","apiVersion":"cp.iot.sap/v1","metadata":{"resourceVersion":"300","annotations":{"k8s.io/initial-events-end":"true"}}}}'
fin='.metadata.finalizers = ["com.sap.iotservices/namespace-dropper"]'

# 01: a new instance, nothing else there
{ echo "$secret" | ev; ev <"$W/parent.json"; echo "$bookmark"; } >"$F/01-create.in.jsonl"

# 01-finalized: the same once 01's finalizer patch is stored (children only then)
{ echo "$secret" | ev; jq -c "$fin | .metadata.resourceVersion = \"101\"" "$W/parent.json" | ev; echo "$bookmark"; } \
	>"$F/01-finalized.in.jsonl"

# 01-namespace: the same with the namespace it created there: every other child once (its
# RoleBinding first), then Processing
{ echo "$secret" | ev; jq -c "$fin | .metadata.resourceVersion = \"101\"" "$W/parent.json" | ev
  jq -c 'select(.kind == "Namespace")' "$W/created.jsonl" | ev; echo "$bookmark"; } >"$F/01-namespace.in.jsonl"

# 02: everything created, nothing ready yet: Processing, no write
jq -c "$fin | .metadata.resourceVersion = \"101\"" "$W/parent.json" >"$W/p1.json"
jq -s . "$W/created.jsonl" >"$W/created.json"
iot_input "$W/p1.json" "$W/created.json" >"$W/in2.json"
iot_sync "$W/in2.json" "$W/out2.json"
jq -c ".status = \$s" --argjson s "$(jq -c .status "$W/out2.json")" "$W/p1.json" >"$W/p2.json"
{ echo "$secret" | ev; ev <"$W/p2.json"; ev <"$W/created.jsonl"; echo "$bookmark"; } >"$F/02-created.in.jsonl"

# 03: then the children become ready (MODIFIED events): Available
{ cat "$F/02-created.in.jsonl"; jq -c '{type: (if .kind == "Pod" then "ADDED" else "MODIFIED" end), object: .}' "$W/ready.jsonl"; } >"$F/03-ready.in.jsonl"

# 04: the same view with the Available status stored: nothing at all
jq -s . "$W/ready.jsonl" >"$W/ready.json"
iot_input "$W/p2.json" "$W/ready.json" >"$W/in4.json"
iot_sync "$W/in4.json" "$W/out4.json"
jq -c ".status = \$s" --argjson s "$(jq -c .status "$W/out4.json")" "$W/p2.json" >"$W/p4.json"
{ echo "$secret" | ev; ev <"$W/p4.json"; ev <"$W/ready.jsonl"; echo "$bookmark"; } >"$F/04-steady.in.jsonl"

# 05: spec edit (image): one apply, Processing
jq -c '.metadata.generation = 2 | .metadata.resourceVersion = "400" | .spec.cockpit.image = "registry/cockpit:5"' "$W/p4.json" >"$W/p5.json"
{ cat "$F/04-steady.in.jsonl"; ev MODIFIED <"$W/p5.json"; } >"$F/05-edit-image.in.jsonl"

# 06: core_spring disabled: core created, core-spring and processing pruned
jq -c '.metadata.generation = 2 | .metadata.resourceVersion = "400" | .spec.core_spring.enabled = false' "$W/p4.json" >"$W/p6.json"
{ cat "$F/04-steady.in.jsonl"; ev MODIFIED <"$W/p6.json"; } >"$F/06-core.in.jsonl"

# 07: postgresql.size 0 and network policies off: pruned
jq -c '.metadata.generation = 2 | .metadata.resourceVersion = "400" | .spec.postgresql.size = 0 | .spec.enableNetworkPolicies = false' "$W/p4.json" >"$W/p7.json"
{ cat "$F/04-steady.in.jsonl"; ev MODIFIED <"$W/p7.json"; } >"$F/07-prune.in.jsonl"

# 08: an invalid spec (port "abc"): Failed, nothing written to the children
jq -c '.metadata.generation = 2 | .metadata.resourceVersion = "400" | .spec.cockpit.container_port = "abc"' "$W/p4.json" >"$W/p8.json"
{ cat "$F/04-steady.in.jsonl"; ev MODIFIED <"$W/p8.json"; } >"$F/08-invalid.in.jsonl"

# 09: deletion with the namespace still there; 10: the namespace terminating
jq -c '.metadata.deletionTimestamp = "2026-11-22T10:00:00Z" | .metadata.resourceVersion = "500"' "$W/p4.json" >"$W/p9.json"
{ cat "$F/04-steady.in.jsonl"; ev MODIFIED <"$W/p9.json"; } >"$F/09-delete.in.jsonl"
jq -c 'select(.kind == "Namespace") | .metadata.deletionTimestamp = "2026-11-22T10:00:01Z" | .status.phase = "Terminating" | .metadata.resourceVersion = "501"' "$W/ready.jsonl" >"$W/nsterm.json"
{ cat "$F/09-delete.in.jsonl"; ev MODIFIED <"$W/nsterm.json"; } >"$F/10-delete-terminating.in.jsonl"

# 11-14: more spec edits, each changing exactly its objects
edit () {
	jq -c ".metadata.generation = 2 | .metadata.resourceVersion = \"400\" | $2" "$W/p4.json" >"$W/$1.json"
	{ cat "$F/04-steady.in.jsonl"; ev MODIFIED <"$W/$1.json"; } >"$F/$1.in.jsonl"
}
edit 11-edit-size '.spec.gateway.mqtt.size = 3'
edit 12-edit-resources '.spec.haproxy.resources = {limits: {memory: "1024Mi", cpu: "0.5"}}'
edit 13-edit-port '.spec.cockpit.container_port = "8090"'
edit 14-edit-config '.spec.domain_name = "other.example"'

# 15 (fed one step at a time after 05): its status stored (the primary's own event) while the edited
# Deployment is not seen yet (its apply on its way): Processing still; then
# the Deployment as the server stores the edit, rolled out: Available
iot_input "$W/p5.json" "$W/ready.json" >"$W/in5.json"
iot_sync "$W/in5.json" "$W/out5.json"
jq -c '.metadata.resourceVersion = "401" | .status = $s' --argjson s "$(jq -c .status "$W/out5.json")" "$W/p5.json" \
	>"$W/p15.json"
live ready "$W/out5.json" | jq -c 'select(.kind == "Deployment" and (.metadata.name | startswith("cockpit-")))
	| .metadata.generation = 2 | .status.observedGeneration = 2 | .metadata.resourceVersion = "402"' >"$W/cockpit2.json"
ev MODIFIED <"$W/p15.json" >"$F/15-landing-status.jsonl"
ev MODIFIED <"$W/cockpit2.json" >"$F/15-landing-deployment.jsonl"

# 16: the namespace, seen and ours, applied from another desired object (its applied annotation
# another's): applied again, to that very namespace (the uid seen in the apply)
jq -c 'select(.kind == "Namespace") | .metadata.annotations["iot-operator/applied"] = "00000000000000000000000000000000"
	| .metadata.resourceVersion = "600"' "$W/ready.jsonl" >"$W/nsother.json"
{ cat "$F/04-steady.in.jsonl"; ev MODIFIED <"$W/nsother.json"; } >"$F/16-namespace-applied.in.jsonl"
