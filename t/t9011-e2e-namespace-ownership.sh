#!/bin/sh
test_description='end to end: a namespace the operator did not make for an IoTService is never adopted, written or deleted'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

P=precious
PNS=$O-$P
PPATH=/apis/cp.iot.sap/v1/namespaces/$O/iotservices/$P

# -v: ksim logs every request with its user agent, so that the operator's requests can be told apart
e2e_ksim_start -v

# precious_is PHASE [TEXT]: the IoTService precious is about its generation, in PHASE, and its
# Progressing condition's message holds TEXT
precious_is () {
	ksim_curl -o precious.json "$PPATH" &&
	jq -e --arg phase "$1" --arg text "${2:-}" '.status.observedGeneration == .metadata.generation
		and .status.phase == $phase
		and ([.status.conditions[]? | select(.type == "Progressing") | .message | contains($text)] == [true])' \
		precious.json >/dev/null
}

precious_apply () {
	sed "s/name: example-iotservice/name: $P/" "$PROJECT_ROOT/deploy/example-iotservice.yaml" | k apply -f - >/dev/null
}

# ns_meta NAME: the namespace's labels and annotations, or "gone"
ns_meta () {
	if ksim_curl -f -o ns.json "/api/v1/namespaces/$1" 2>/dev/null; then
		jq -c '[.metadata.labels, .metadata.annotations, .status.phase]' ns.json
	else
		echo gone
	fi
}

gone () {
	test "$(ns_meta "$1")" = gone
}

# log_mark FILE: how many lines ksim's log has now, kept in FILE
log_mark () {
	wc -l <"$KSIM_LOG" >"$1"
}

# no_operator_write_to NS MARK: ksim's log since MARK (log_mark) holds requests of the operator (user agent
# iot-operator/...), none of them a write to namespace NS or to anything in it, and its every create of a
# namespace NS refused as AlreadyExists
no_operator_write_to () {
	tail -n "+$(($(cat "$2") + 1))" "$KSIM_LOG" |
		jq -R -c "fromjson? | select(.msg == \"request\" and (.userAgent | startswith(\"iot-operator/\")))" \
		>op-requests.jsonl &&
	test -s op-requests.jsonl &&
	jq -c --arg ns "$1" "select((.method == \"POST\" or .method == \"PUT\" or .method == \"PATCH\" or .method == \"DELETE\")
		and (.path | test(\"^/api/v1/namespaces/\" + \$ns + \"(/|\$)\")
				or test(\"^/apis/[^/]+/[^/]+/namespaces/\" + \$ns + \"(/|\$)\")))" op-requests.jsonl >op-writes &&
	test_cmp /dev/null op-writes &&
	jq -c --arg ns "$1" "select(.method == \"POST\" and .path == \"/api/v1/namespaces\" and .name == \$ns) | .code" \
		op-requests.jsonl >op-creates &&
	test -s op-creates &&
	sort -u op-creates >codes &&
	echo 409 >expect &&
	test_cmp expect codes
}

# ns_writers NAME: the namespace's resourceVersion and the managers that wrote it (managedFields)
ns_writers () {
	ksim_curl -f -o nsw.json "/api/v1/namespaces/$1" &&
	jq -c "[.metadata.resourceVersion, ([.metadata.managedFields[]?.manager] | sort)]" nsw.json
}

test_expect_success 'setup: deploy/, the operator, a namespace of a user with data in it' '
	e2e_install &&
	e2e_operator_start op &&
	k create namespace $PNS >/dev/null &&
	k create configmap keepme -n $PNS --from-literal=a=b >/dev/null &&
	k create namespace unrelated >/dev/null &&
	ns_meta $PNS >meta.before &&
	grep kubernetes.io/metadata.name meta.before &&
	ns_writers $PNS >writers.before &&
	! grep iot-operator writers.before &&
	log_mark mark.setup
'

test_expect_success 'an IoTService whose instance namespace is the user'"'"'s: Failed, naming it and why' '
	precious_apply &&
	test_wait_for 60 precious_is Failed "namespace $PNS exists and is not this operator" &&
	precious_is Failed "namespace $PNS exists and is not this operator" &&
	jq -r .status.reason precious.json >reason &&
	echo "namespace $PNS exists and is not this operator'"'"'s (made by someone else, or its labels were removed): nothing is written into it and it is never deleted; the instance proceeds once it is gone" >expect &&
	test_cmp expect reason
'

test_expect_success 'nothing of the operator in the namespace: no label, no annotation, no object; keepme there' '
	ns_meta $PNS >meta.after &&
	test_cmp meta.before meta.after &&
	k get configmap keepme -n $PNS -o json >keepme.json &&
	jq -r .data.a keepme.json >value &&
	echo b >expect && test_cmp expect value &&
	for r in secrets services rolebindings.rbac.authorization.k8s.io deployments.apps statefulsets.apps \
		networkpolicies.networking.k8s.io
	do
		k get $r -n $PNS -o name >objs.$r && test_cmp /dev/null objs.$r || return 1
	done
'

test_expect_success 'deleting the IoTService leaves the namespace and its data alone' '
	k delete iotservice $P -n $O --timeout=30s >/dev/null &&
	test_must_fail ksim_curl -f -o /dev/null "$PPATH" 2>/dev/null &&
	ns_meta $PNS >meta.after &&
	test_cmp meta.before meta.after &&
	k get configmap keepme -n $PNS -o name >actual &&
	echo configmap/keepme >expect && test_cmp expect actual
'

test_expect_success 'no write of the operator to that namespace: none in ksim'"'"'s request log; the namespace unchanged' '
	no_operator_write_to $PNS mark.setup &&
	ns_writers $PNS >writers.after &&
	test_cmp writers.before writers.after
'

test_expect_success 'created again, then the owner deletes the namespace: Available in a namespace of its own' '
	log_mark mark.again &&
	precious_apply &&
	test_wait_for 60 precious_is Failed "namespace $PNS exists" &&
	precious_is Failed "namespace $PNS exists" &&
	# (until its owner deletes it, nothing of the operator written to it)
	no_operator_write_to $PNS mark.again &&
	ns_writers $PNS >writers.again &&
	test_cmp writers.before writers.again &&
	k delete namespace $PNS --timeout=30s >/dev/null &&
	test_wait_for 120 precious_is Available &&
	precious_is Available &&
	ksim_curl -o ns.json "/api/v1/namespaces/$PNS" &&
	jq -r ".metadata.annotations[\"cp.iot.sap/iotservice-uid\"]" ns.json >actual &&
	jq -r .metadata.uid precious.json >expect &&
	test_cmp expect actual &&
	test_must_fail k get configmap keepme -n $PNS -o name 2>/dev/null
'

test_expect_success 'deleting it then removes that namespace only' '
	k delete iotservice $P -n $O --timeout=30s >/dev/null &&
	test_wait_for 30 gone $PNS &&
	gone $PNS &&
	ns_meta unrelated | grep -v gone
'

# An earlier IoTService's namespace held Terminating by a finalizer of someone else's: the
# IoTService of the same name created again waits for it, then gets a namespace of its own.
test_expect_success 'created again while its old namespace is still terminating: waits, then a namespace of its own' '
	precious_apply &&
	test_wait_for 120 precious_is Available &&
	precious_is Available &&
	jq -r .metadata.uid precious.json >uid.old &&
	k patch namespace $PNS --type merge -p "{\"metadata\":{\"finalizers\":[\"example.com/hold\"]}}" >/dev/null &&
	k delete iotservice $P -n $O --timeout=30s >/dev/null &&
	ns_meta $PNS | grep Terminating &&
	precious_apply &&
	test_wait_for 60 precious_is Processing "waiting for namespace $PNS, left by an earlier IoTService" &&
	precious_is Processing "waiting for namespace $PNS, left by an earlier IoTService" &&
	jq -r .metadata.uid precious.json >uid.new &&
	! test_cmp uid.old uid.new >/dev/null &&
	k patch namespace $PNS --type merge -p "{\"metadata\":{\"finalizers\":null}}" >/dev/null &&
	test_wait_for 120 precious_is Available &&
	precious_is Available &&
	ksim_curl -o ns.json "/api/v1/namespaces/$PNS" &&
	jq -r ".metadata.annotations[\"cp.iot.sap/iotservice-uid\"]" ns.json >actual &&
	test_cmp uid.new actual
'

# An instance namespace made by an operator older than the uid annotation: labelled, not marked. The
# IoTService goes Failed saying how to mark it; the admin runs the command docs/iotservice-api.md gives.
U=upgraded
UNS=$O-$U
UPATH=/apis/cp.iot.sap/v1/namespaces/$O/iotservices/$U

upgraded_is () {
	ksim_curl -o upgraded.json "$UPATH" &&
	jq -e --arg phase "$1" '.status.observedGeneration == .metadata.generation and .status.phase == $phase' \
		upgraded.json >/dev/null
}

test_expect_success 'upgrade: a namespace the older operator made (labels, no uid): Failed, the reason saying how to mark it' '
	k create namespace $UNS >/dev/null &&
	k label namespace $UNS app.kubernetes.io/managed-by=iot-operator cp.iot.sap/operator=$O cp.iot.sap/instance=$U >/dev/null &&
	k create configmap data -n $UNS --from-literal=a=b >/dev/null &&
	sed "s/name: example-iotservice/name: $U/" "$PROJECT_ROOT/deploy/example-iotservice.yaml" | k apply -f - >/dev/null &&
	test_wait_for 60 upgraded_is Failed &&
	upgraded_is Failed &&
	uid=$(jq -r .metadata.uid upgraded.json) &&
	jq -r .status.reason upgraded.json >reason &&
	echo "namespace $UNS carries this operator'"'"'s labels but no cp.iot.sap/iotservice-uid annotation (made by an operator older than it, or labelled by hand): nothing is written into it and it is never deleted; if it is this IoTService'"'"'s, mark it so: kubectl annotate namespace $UNS cp.iot.sap/iotservice-uid=$uid; else the instance proceeds once it is gone" >expect &&
	test_cmp expect reason &&
	ns_writers $UNS >writers.unmarked &&
	! grep iot-operator writers.unmarked
'

test_expect_success 'upgrade: the command of docs/iotservice-api.md marks it; Available in it, its data kept; nothing else marked' '
	awk "/^\*\*Upgrading from an operator older than the annotation/ { sect = 1; next }
	     sect && /^\`\`\`sh\$/ { inblock = 1; next }
	     inblock && /^\`\`\`\$/ { exit }
	     inblock { print }" "$PROJECT_ROOT/docs/iotservice-api.md" >mark.sh &&
	grep -q "kubectl annotate" mark.sh &&
	ns_meta unrelated >unrelated.before &&
	ns_meta $PNS >pns.before &&
	( PATH="$(dirname "$KUBECTL"):$PATH" && export PATH && sh mark.sh >mark.out 2>mark.err ) &&
	test_wait_for 120 upgraded_is Available &&
	upgraded_is Available &&
	ksim_curl -o ns.json "/api/v1/namespaces/$UNS" &&
	jq -r ".metadata.annotations[\"cp.iot.sap/iotservice-uid\"]" ns.json >actual &&
	jq -r .metadata.uid upgraded.json >expect &&
	test_cmp expect actual &&
	k get configmap data -n $UNS -o name >actual &&
	echo configmap/data >expect && test_cmp expect actual &&
	ns_meta unrelated >unrelated.after &&
	test_cmp unrelated.before unrelated.after &&
	ns_meta $PNS >pns.after &&
	test_cmp pns.before pns.after
'

test_expect_success 'stop' '
	e2e_operator_stop op &&
	ksim_stop
'

test_done
